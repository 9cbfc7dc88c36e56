package restorer

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/testmodel"
)

// A layout option the target format does not honour (formats.Planner.
// Honours) is refused, naming the option, the target and what it takes,
// before anything is planned or written; options it honours go through.
func TestCheckoutRefusesOptionsTheTargetIgnores(t *testing.T) {
	st, _, d := added(t, testmodel.Spec{Layers: 1, Hidden: 16, Vocab: 64, DType: "F32", Seed: 3})
	for _, c := range []struct {
		opts Options
		flag string
	}{
		{Options{WriteOptions: formats.WriteOptions{SplitMaxSize: 1 << 20}}, "--split-max-size"},
		{Options{WriteOptions: formats.WriteOptions{Alignment: 64}}, "--alignment"},
		{Options{Format: "safetensors", WriteOptions: formats.WriteOptions{InlineData: true}}, "--inline-data"},
		{Options{Format: "gguf", WriteOptions: formats.WriteOptions{ExternalData: "w.data"}}, "--external-data"},
		{Options{Format: "pytorch", WriteOptions: formats.WriteOptions{SplitMaxTensors: 2}}, "--split-max-tensors"},
		{Options{Format: "gguf", WriteOptions: formats.WriteOptions{Extract: true}}, "--extract"},
	} {
		dest := filepath.Join(t.TempDir(), "out")
		_, err := Checkout(context.Background(), st, d, dest, c.opts)
		if errs.ClassOf(err) != errs.SchemaError || !strings.Contains(err.Error(), c.flag) || !strings.Contains(err.Error(), "which takes") {
			t.Errorf("%+v: err = %v, want schema_error naming %s and what the target takes", c.opts, err, c.flag)
		}
		if _, statErr := filepath.Glob(dest + "*"); statErr != nil {
			t.Fatal(statErr)
		}
		if m, _ := filepath.Glob(dest + "*"); len(m) != 0 {
			t.Errorf("%+v: refused checkout left %v", c.opts, m)
		}
	}
	for _, opts := range []Options{{WriteOptions: formats.WriteOptions{MaxShardSize: 4096}}, {Format: "gguf", WriteOptions: formats.WriteOptions{Alignment: 64, SplitMaxTensors: 2}}, {Format: "pytorch", WriteOptions: formats.WriteOptions{DType: "f16", Clamp: true}}} {
		if _, err := Checkout(context.Background(), st, d, filepath.Join(t.TempDir(), "ok"), opts); err != nil {
			t.Errorf("%+v: %v", opts, err)
		}
	}
}

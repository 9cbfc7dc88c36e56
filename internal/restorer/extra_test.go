package restorer

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/safetensors"
	"github.com/mstore/mstore/internal/testmodel"
)

// A planner's Extra files are written beside its layout, each replacing
// the version's own file of that path (and only that one), and its Note
// reaches the result.
func TestPlannedExtraFilesAndNote(t *testing.T) {
	st, dir, d := added(t, testmodel.Spec{Layers: 1, Hidden: 64, Vocab: 256, DType: "F32", Seed: 7})
	extra := map[string][]byte{"config.json": []byte("{\"rewritten\": true}\n"), "sub/tokenizer.json": []byte("{}\n")}
	withCodecs(t, testPlanner{Codec: safetensors.Codec, name: "test-extra", plan: func(req PlanRequest) (*Planned, error) {
		in := make([]formats.Tensor, len(req.Tensors))
		for i, tn := range req.Tensors {
			in[i] = formats.Tensor{Name: tn.Name, DType: tn.DType, Shape: tn.Shape, Size: tn.Size}
		}
		l, err := safetensors.Plan(in, safetensors.PlanOptions{})
		if err != nil {
			return nil, err
		}
		return &Planned{Layout: l, Extra: extra, Note: "a planner's note"}, nil
	}})
	dest := filepath.Join(t.TempDir(), "out")
	res, err := Checkout(context.Background(), st, d, dest, Options{Format: "test-extra"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Note, "a planner's note") {
		t.Fatalf("note %q lacks the planner's", res.Note)
	}
	got := readTree(t, dest)
	for p, want := range extra {
		if !bytes.Equal(got[p], want) {
			t.Fatalf("%s = %q, want the planned %q", p, got[p], want)
		}
	}
	// The version's other files are written as they were.
	orig, err := os.ReadFile(filepath.Join(dir, "generation_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got["generation_config.json"], orig) {
		t.Fatalf("generation_config.json = %q, want %q", got["generation_config.json"], orig)
	}
}

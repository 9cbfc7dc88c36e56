package restorer

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/safetensors"
	"github.com/mstore/mstore/internal/testmodel"
)

// A planner whose tensors are made by transforms: each tensor's bytes are
// reversed, and the model's first tensor is refused when refuse is set.
func reversingPlanner(name string, refuse bool) formats.Codec {
	return testPlanner{Codec: safetensors.Codec, name: name, plan: func(req PlanRequest) (*Planned, error) {
		in := make([]formats.Tensor, len(req.Tensors))
		tr := make([]Transform, len(req.Tensors))
		for i, t := range req.Tensors {
			in[i] = formats.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Size: t.Size}
			tr[i] = func(src []byte) ([]byte, error) {
				if refuse && i == 0 {
					return nil, errs.New(errs.LossyConversion, "test", "refused %s", t.Name)
				}
				out := bytes.Clone(src)
				slices.Reverse(out)
				return out, nil
			}
		}
		l, err := safetensors.Plan(in, safetensors.PlanOptions{})
		if err != nil {
			return nil, err
		}
		l.Format = "safetensors"
		return &Planned{Layout: l, Transforms: tr}, nil
	}}
}

func TestTransformedTensorsAreWrittenAndVerified(t *testing.T) {
	st, dir, d := added(t, testmodel.Spec{Layers: 1, Hidden: 64, Vocab: 20000, DType: "F32", Seed: 5})
	withCodecs(t, reversingPlanner("test-reversed", false), reversingPlanner("test-refused", true))

	dest := filepath.Join(t.TempDir(), "out")
	res, err := Checkout(context.Background(), st, d, dest, Options{Format: "test-reversed"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Relayout {
		t.Fatal("a conversion must be a re-layout")
	}
	// Every tensor comes out reversed: parse both files and compare.
	tensorsOf := func(files map[string][]byte) map[string][]byte {
		mem := formattest.NewMemDir(files)
		l, err := safetensors.Codec.Parse(mem, []string{"model.safetensors"})
		if err != nil {
			t.Fatal(err)
		}
		data, err := formattest.TensorData(l, files)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]byte{}
		for i, tn := range l.Tensors {
			out[tn.Name] = data[i]
		}
		return out
	}
	orig, got := tensorsOf(readTree(t, dir)), tensorsOf(readTree(t, dest))
	if len(got) != len(orig) {
		t.Fatalf("%d tensors, want %d", len(got), len(orig))
	}
	for name, b := range orig {
		want := bytes.Clone(b)
		slices.Reverse(want)
		if !bytes.Equal(got[name], want) {
			t.Fatalf("tensor %s was not transformed", name)
		}
	}

	parent := t.TempDir()
	_, err = Checkout(context.Background(), st, d, filepath.Join(parent, "refused"), Options{Format: "test-refused"})
	if !errors.Is(err, errs.LossyConversion) {
		t.Fatalf("err = %v, want lossy_conversion", err)
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Fatalf("a refused conversion left %v", left)
	}
}

// A planner's ByChunk marks, one per tensor beside its transforms, are
// checked before they are used: a planner that gives too few, or marks
// without transforms, fails the checkout with its name, not a panic.
func TestPlannerByChunkMarksAreChecked(t *testing.T) {
	st, _, d := added(t, testmodel.Spec{Layers: 1, Hidden: 16, Vocab: 64, DType: "F32", Seed: 5})
	marks := func(name string, transforms bool, n int) formats.Codec {
		return testPlanner{Codec: safetensors.Codec, name: name, plan: func(req PlanRequest) (*Planned, error) {
			p, err := reversingPlanner(name, false).(formats.Planner).PlanCheckout(req)
			if err != nil {
				return nil, err
			}
			if !transforms {
				p.Transforms = nil
			}
			p.ByChunk = make([]bool, n)
			return p, nil
		}}
	}
	withCodecs(t, marks("test-few", true, 1), marks("test-bare", false, 5))
	for _, format := range []string{"test-few", "test-bare"} {
		_, err := Checkout(context.Background(), st, d, filepath.Join(t.TempDir(), "out"), Options{Format: format})
		if err == nil || !strings.Contains(err.Error(), "planner for safetensors returned") || !strings.Contains(err.Error(), "ByChunk marks") {
			t.Fatalf("%s: err = %v, want the planner's ByChunk refused", format, err)
		}
	}
}

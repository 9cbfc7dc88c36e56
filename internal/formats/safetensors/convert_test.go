package safetensors

import (
	"bytes"
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

// A source's Export.Convert renames the tensors, reorders their bytes
// after the --dtype cast and adds its files beside (Planned.Extra).
func TestPlanCheckoutAppliesConversion(t *testing.T) {
	var seen []int
	files := map[string][]byte{"config.json": []byte("{}")}
	req := formats.PlanRequest{
		Source: &objects.Manifest{Format: "gguf"},
		Tensors: []objects.Tensor{
			{Name: "blk.0.attn_q.weight", DType: "F32", Shape: []int64{2, 2}, Size: 16},
			{Name: "output_norm.weight", DType: "F32", Shape: []int64{2}, Size: 8},
		},
		Options: formats.WriteOptions{DType: "f16"},
		From: &formats.Export{Name: "model", Convert: &formats.Conversion{
			Names: []string{"model.layers.0.self_attn.q_proj.weight", "model.norm.weight"},
			Reorders: []formats.Transform{func(b []byte) ([]byte, error) {
				seen = append(seen, len(b))
				return append(bytes.Clone(b[4:]), b[:4]...), nil // swap the two F16 rows
			}, nil},
			Files: files,
		}},
	}
	p, err := codec{}.PlanCheckout(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Layout.Tensors[0].Name + "," + p.Layout.Tensors[1].Name; got != "model.layers.0.self_attn.q_proj.weight,model.norm.weight" {
		t.Fatalf("names %s", got)
	}
	if p.Layout.Files[0].Path != "model.safetensors" || !bytes.Equal(p.Extra["config.json"], files["config.json"]) {
		t.Fatalf("files %s, extra %v", p.Layout.Files[0].Path, p.Extra)
	}
	one, two := []byte{0, 0, 0x80, 0x3f}, []byte{0, 0, 0, 0x40} // 1.0, 2.0 in F32
	src := append(append(append(append([]byte{}, one...), one...), two...), two...)
	b, err := p.Transforms[0](src)
	if err != nil {
		t.Fatal(err)
	}
	// Cast first (8 bytes of F16 reach the reorder), then rows swapped.
	if want := []byte{0, 0x40, 0, 0x40, 0, 0x3c, 0, 0x3c}; !bytes.Equal(b, want) || len(seen) != 1 || seen[0] != 8 {
		t.Fatalf("tensor 0 = % x (reorder saw %v), want % x", b, seen, want)
	}
}

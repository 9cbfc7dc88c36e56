package onnx

import (
	"bytes"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
)

// planModel has initializers of 4 KiB, 2 MiB and 512 bytes, and a
// Constant of 2 KiB.
func planModel() map[string][]byte {
	return map[string][]byte{"m.onnx": modelMsg(graphMsg(
		rawTensor("small", typeFloat, f32(1024), 1024),
		rawTensor("big", typeFloat, f32(512<<10), 512<<10),
		rawTensor("tiny", typeFloat, f32(128), 128),
	).sub(graphNode, constantNode("c", rawTensor("", typeFloat, f32(512), 512))))}
}

func TestPlanPlacement(t *testing.T) {
	files := planModel()
	l, err := parseFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		opts     PlanOptions
		external map[string]int64 // tensor → offset in the data file
		dataSize int64
	}{
		{"inside", PlanOptions{}, map[string]int64{}, 0},
		// onnx's packing for small tensors, ONNX Runtime's 4 KiB for big ones.
		{"defaults", PlanOptions{ExternalData: "m.data"}, map[string]int64{"small": 0, "big": 4096}, 4096 + 2<<20},
		{"threshold", PlanOptions{ExternalData: "m.data", SizeThreshold: 8192}, map[string]int64{"big": 0}, 2 << 20},
		{"every tensor aligned", PlanOptions{ExternalData: "m.data", Alignment: 64, SizeThreshold: 1}, map[string]int64{"small": 0, "big": 4096, "tiny": 4096 + 2<<20}, 4096 + 2<<20 + 512},
		{"wide alignment", PlanOptions{ExternalData: "m.data", Alignment: 1 << 20}, map[string]int64{"small": 0, "big": 1 << 20}, 3 << 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			planned, written := replan(t, l, files, c.opts)
			back, err := parseFiles(written)
			if err != nil {
				t.Fatalf("written files do not parse: %v", err)
			}
			checkSameLayout(t, back, planned)
			got := map[string]int64{}
			for _, f := range back.Files {
				if f.Path == "m.data" {
					if f.Size != c.dataSize {
						t.Errorf("data file of %d bytes, want %d", f.Size, c.dataSize)
					}
					for _, e := range f.Extents {
						if e.Kind == formats.TensorData {
							got[back.Tensors[e.Tensor].Name] = e.Offset
						} else if !bytes.Equal(written["m.data"][e.Offset:e.Offset+e.Size], make([]byte, e.Size)) {
							t.Errorf("padding at %d is not zeros", e.Offset)
						}
					}
				}
			}
			if len(got) != len(c.external) {
				t.Fatalf("external tensors %v, want %v", got, c.external)
			}
			for name, off := range c.external {
				if got[name] != off {
					t.Errorf("%s at %d, want %d", name, got[name], off)
				}
			}
		})
	}
}

func TestPlanRefuses(t *testing.T) {
	files := planModel()
	l, err := parseFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	src := sourceFiles(l, files)
	renamed := append([]formats.Tensor{}, l.Tensors...)
	renamed[1].Name = "other"
	cases := []struct {
		name    string
		tensors []formats.Tensor
		opts    PlanOptions
		class   errs.Class
	}{
		{"name in a folder", l.Tensors, PlanOptions{ExternalData: "sub/m.data"}, errs.PathTraversal},
		{"name leaving", l.Tensors, PlanOptions{ExternalData: "../m.data"}, errs.PathTraversal},
		{"an .onnx name", l.Tensors, PlanOptions{ExternalData: "x.onnx"}, errs.SchemaError},
		{"the model's own name", l.Tensors, PlanOptions{ExternalData: "m.ONNX"}, errs.SchemaError},
		{"alignment not a power of two", l.Tensors, PlanOptions{ExternalData: "m.data", Alignment: 48}, errs.SchemaError},
		{"alignment too wide", l.Tensors, PlanOptions{ExternalData: "m.data", Alignment: 2 * MaxAlignment}, errs.SchemaError},
		{"negative threshold", l.Tensors, PlanOptions{ExternalData: "m.data", SizeThreshold: -1}, errs.SchemaError},
		{"tensors that are not the frame's", renamed, PlanOptions{}, errs.IntegrityError},
		{"fewer tensors", l.Tensors[:2], PlanOptions{}, errs.IntegrityError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Plan(src, c.tensors, c.opts); errs.ClassOf(err) != c.class {
				t.Errorf("got %v, want %s", err, c.class.Key())
			}
		})
	}
	// A frame missing bytes the walk needs.
	broken := sourceFiles(l, files)
	broken[0].Extents[0].Bytes = nil
	if _, err := Plan(broken, l.Tensors, PlanOptions{}); errs.ClassOf(err) != errs.IntegrityError {
		t.Errorf("frame without bytes: %v, want integrity_error", err)
	}
}

// TestPlanPastTwoGiB: a model whose 3 GiB tensor is external can be
// planned with it outside, but not inside.
func TestPlanPastTwoGiB(t *testing.T) {
	model := modelMsg(graphMsg(extTensor("huge", 2, []int64{3 << 30}, "location", "huge.bin")))
	src := []SourceFile{{Path: "m.onnx", Size: int64(len(model)), Extents: []formats.Extent{{Kind: formats.Frame, Size: int64(len(model)), Bytes: model}}}}
	tensors := []formats.Tensor{{Name: "huge", DType: "U8", Shape: []int64{3 << 30}, Size: 3 << 30}}
	if _, err := Plan(src, tensors, PlanOptions{}); errs.ClassOf(err) != errs.SizeLimitExceeded {
		t.Errorf("inside: %v, want size_limit_exceeded", err)
	}
	l, err := Plan(src, tensors, PlanOptions{ExternalData: "huge.data"})
	if err != nil {
		t.Fatalf("outside: %v", err)
	}
	if len(l.Files) != 2 || l.Files[0].Path != "huge.data" || l.Files[0].Size != 3<<30 {
		t.Errorf("files %+v", l.Files)
	}
}

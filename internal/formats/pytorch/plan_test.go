package pytorch

import (
	"math"
	"slices"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
)

// Planned files parse back to the same tensors, every one its own storage.
func TestPlanRoundTrip(t *testing.T) {
	for name, opts := range map[string]PlanOptions{
		"single":                         {File: "weights.pt"},
		"sharded":                        {File: "pytorch_model.bin", MaxShardSize: 70},
		"one shard when everything fits": {MaxShardSize: 1 << 20},
	} {
		t.Run(name, func(t *testing.T) {
			l, err := Plan(mixed, opts)
			if err != nil {
				t.Fatal(err)
			}
			files := materialize(t, l, mixed)
			if err := formattest.CheckLayout(l, files); err != nil {
				t.Fatal(err)
			}
			back, err := Codec.Parse(formattest.NewMemDir(files), formattest.ClaimedPaths(Codec, files))
			if err != nil {
				t.Fatal(err)
			}
			data := make([][]byte, len(mixed))
			for i, tn := range mixed {
				data[i] = formattest.Content(tn.Name, tn.Size)
			}
			if err := formattest.SameTensors(l, data, back, files); err != nil {
				t.Fatal(err)
			}
			for _, f := range back.Files {
				if f.Meta != nil {
					t.Errorf("%s has Meta %v: every planned tensor is its own storage", f.Path, f.Meta)
				}
			}
			var paths []string
			for _, f := range l.Files {
				paths = append(paths, f.Path)
			}
			switch name {
			case "single":
				if !slices.Equal(paths, []string{"weights.pt"}) {
					t.Fatalf("files %q", paths)
				}
			case "sharded":
				if len(paths) < 3 || paths[0] != "pytorch_model-00001-of-0000"+string(rune('0'+len(paths)-1))+".bin" || paths[len(paths)-1] != indexName {
					t.Fatalf("files %q", paths)
				}
			default:
				if !slices.Equal(paths, []string{DefaultFile}) {
					t.Fatalf("files %q", paths)
				}
			}
		})
	}
}

func TestPlanRefusals(t *testing.T) {
	f32 := formats.Tensor{Name: "w", DType: "F32", Shape: []int64{2}, Size: 8}
	for _, tc := range []struct {
		name    string
		tensors []formats.Tensor
		opts    PlanOptions
		class   errs.Class
	}{
		{"repeated name", []formats.Tensor{f32, f32}, PlanOptions{}, errs.SchemaError},
		{"size that disagrees with the shape", []formats.Tensor{{Name: "w", DType: "F32", Shape: []int64{2}, Size: 4}}, PlanOptions{}, errs.SchemaError},
		{"quantized GGUF type", []formats.Tensor{{Name: "w", DType: "Q4_0", Shape: []int64{32}, Size: 18}}, PlanOptions{}, errs.UnsupportedVersion},
		{"packed F4", []formats.Tensor{{Name: "w", DType: "F4", Shape: []int64{2}, Size: 1}}, PlanOptions{}, errs.UnsupportedVersion},
		{"file outside the directory", []formats.Tensor{f32}, PlanOptions{File: "../w.bin"}, errs.PathTraversal},
		{"name not UTF-8", []formats.Tensor{{Name: "\xff", DType: "F32", Shape: []int64{2}, Size: 8}}, PlanOptions{}, errs.SchemaError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Plan(tc.tensors, tc.opts)
			wantClass(t, err, tc.class)
		})
	}
}

// The writer's integers read back as the same values, at every width
// pickle.py would choose.
func TestPickledInts(t *testing.T) {
	values := []int64{0, 1, 255, 256, 65535, 65536, -1, math.MinInt32, math.MaxInt32, 1 << 31, 1 << 40, -1 << 40, math.MaxInt64, math.MinInt64}
	for _, n := range values {
		p := &pickler{memo: map[string]uint32{}}
		p.op(opProto, 2)
		p.int(n)
		p.op(opStop)
		v, err := unpickle(p.b, 0, "x", DefaultLimits, nil, nil)
		if err != nil || v != n {
			t.Errorf("%d reads back as %v (%v)", n, v, err)
		}
	}
}

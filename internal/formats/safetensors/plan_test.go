package safetensors

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
)

func f32s(vs ...float32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// The vectors are those of the reference writer's own tests
// (safetensors/src/tensor.rs: test_serialization, test_empty,
// test_serialization_forced_alignement).
func TestPlanMatchesReferenceWriter(t *testing.T) {
	data := f32s(0, 1, 2, 3, 4, 5)
	cases := []struct {
		name    string
		tensors []formats.Tensor
		meta    map[string]string
		header  string
	}{
		{"one tensor", []formats.Tensor{{Name: "attn.0", DType: "F32", Shape: []int64{1, 2, 3}, Size: 24}}, nil,
			`{"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}}`},
		{"padded to 8", []formats.Tensor{{Name: "attn0", DType: "F32", Shape: []int64{1, 1, 2, 3}, Size: 24}}, nil,
			`{"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       `},
		{"empty", nil, nil, `{}      `},
		{"metadata only", nil, map[string]string{"framework": "pt"}, `{"__metadata__":{"framework":"pt"}}     `},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := Plan(c.tensors, PlanOptions{Metadata: c.meta})
			if err != nil {
				t.Fatal(err)
			}
			contents := make([][]byte, len(c.tensors))
			var want []byte
			want = binary.LittleEndian.AppendUint64(want, uint64(len(c.header)))
			want = append(want, c.header...)
			for i := range c.tensors {
				contents[i] = data
				want = append(want, data...)
			}
			files, err := formattest.Materialize(l, contents)
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != 1 || !bytes.Equal(files["model.safetensors"], want) {
				t.Fatalf("planned\n%q\nwant\n%q", files["model.safetensors"], want)
			}
		})
	}
}

func TestPlanShards(t *testing.T) {
	tensors := make([]formats.Tensor, len(shardSpecs))
	for i, s := range shardSpecs {
		tensors[i] = s.Tensor(t, TensorSize)
	}
	l, err := Plan(tensors, shardOpts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"model-00001-of-00004.safetensors": {"model.embed.weight"},
		"model-00002-of-00004.safetensors": {"model.layers.0.w", "model.layers.0.b", "model.layers.1.w"},
		"model-00003-of-00004.safetensors": {"model.norm"},
		"model-00004-of-00004.safetensors": {"lm_head"}, // over the limit: alone
	}
	if len(l.Files) != 5 || l.Files[4].Path != indexPath || !l.Files[4].Index {
		t.Fatalf("files %+v", l.Files)
	}
	for _, f := range l.Files[:4] {
		var names []string
		for _, e := range f.Extents[1:] {
			names = append(names, l.Tensors[e.Tensor].Name)
		}
		if !slices.Equal(names, want[f.Path]) {
			t.Errorf("%s holds %v, want %v", f.Path, names, want[f.Path])
		}
		if f.Meta["format"] != "pt" || !strings.Contains(string(f.Extents[0].Bytes), `{"__metadata__":{"format":"pt"},`) {
			t.Errorf("%s: metadata not written first: %q", f.Path, f.Extents[0].Bytes)
		}
	}
	// The planned layout is exactly what parsing its own output gives.
	files := generate(t, shardSpecs, shardOpts)
	parsed, err := parseFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	checkSameLayout(t, parsed, l)
}

func TestPlanIndexMatchesTransformers(t *testing.T) {
	// Expected text from Python: json.dumps(index, indent=2, sort_keys=True) + "\n".
	const want = `{
  "metadata": {
    "total_size": 7
  },
  "weight_map": {
    "a\"\\\u007f\u0001\n": "m-00002-of-00002.safetensors",
    "b\u00f1\ud83d\ude00": "m-00001-of-00002.safetensors",
    "z": "m-00001-of-00002.safetensors"
  }
}
`
	tensors := []formats.Tensor{
		{Name: "bñ😀", DType: "U8", Shape: []int64{3}, Size: 3},
		{Name: "z", DType: "U8", Shape: []int64{2}, Size: 2},
		{Name: "a\"\\\x7f\x01\n", DType: "U8", Shape: []int64{2}, Size: 2},
	}
	l, err := Plan(tensors, PlanOptions{MaxShardSize: 5, Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Files) != 3 || l.Files[2].Path != "m.safetensors.index.json" {
		t.Fatalf("files %+v", l.Files)
	}
	if got := string(l.Files[2].Extents[0].Bytes); got != want {
		t.Fatalf("index\n%s\nwant\n%s", got, want)
	}
	data := [][]byte{{1, 2, 3}, {4, 5}, {6, 7}}
	files, err := formattest.Materialize(l, data)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := parseFiles(files)
	if err != nil {
		t.Fatalf("planned model does not parse: %v", err)
	}
	checkSameLayout(t, parsed, l)
}

func TestPlanOneShardWhenAllFits(t *testing.T) {
	tensors := []formats.Tensor{{Name: "a", DType: "U8", Shape: []int64{4}, Size: 4}}
	for _, limit := range []int64{0, 4, 1 << 40} {
		l, err := Plan(tensors, PlanOptions{MaxShardSize: limit})
		if err != nil || len(l.Files) != 1 || l.Files[0].Path != "model.safetensors" {
			t.Errorf("limit %d: %+v, %v", limit, l, err)
		}
	}
	l, err := Plan(append(tensors, formats.Tensor{Name: "b", DType: "U8", Shape: []int64{4}, Size: 4}), PlanOptions{MaxShardSize: 1})
	if err != nil || len(l.Files) != 3 {
		t.Errorf("limit 1: each tensor its own shard, got %+v, %v", l, err)
	}
}

func TestPlanRefusesBadInput(t *testing.T) {
	ok := formats.Tensor{Name: "a", DType: "F32", Shape: []int64{2}, Size: 8}
	cases := []struct {
		name    string
		tensors []formats.Tensor
		opts    PlanOptions
		want    errs.Class
	}{
		{"duplicate name", []formats.Tensor{ok, ok}, PlanOptions{}, errs.SchemaError},
		{"size mismatch", []formats.Tensor{{Name: "a", DType: "F32", Shape: []int64{2}, Size: 7}}, PlanOptions{}, errs.SchemaError},
		{"unknown dtype", []formats.Tensor{{Name: "a", DType: "Q4_K", Shape: []int64{32}, Size: 18}}, PlanOptions{}, errs.UnsupportedVersion},
		{"negative dimension", []formats.Tensor{{Name: "a", DType: "U8", Shape: []int64{-1}, Size: 0}}, PlanOptions{}, errs.SchemaError},
		{"odd F4", []formats.Tensor{{Name: "a", DType: "F4", Shape: []int64{1}, Size: 0}}, PlanOptions{}, errs.SchemaError},
		{"metadata key as a name", []formats.Tensor{{Name: "__metadata__", DType: "U8", Shape: []int64{0}}}, PlanOptions{}, errs.SchemaError},
		{"name not UTF-8", []formats.Tensor{{Name: "\xff", DType: "U8", Shape: []int64{0}}}, PlanOptions{}, errs.SchemaError},
		{"metadata not UTF-8", nil, PlanOptions{Metadata: map[string]string{"k": "\xff"}}, errs.SchemaError},
		{"name leaves the directory", []formats.Tensor{ok}, PlanOptions{Name: "../model"}, errs.PathTraversal},
		{"absolute name", []formats.Tensor{ok}, PlanOptions{Name: "/tmp/model"}, errs.PathTraversal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Plan(c.tensors, c.opts)
			if got := errs.ClassOf(err); got != c.want {
				t.Fatalf("class %s, want %s: %v", got.Key(), c.want.Key(), err)
			}
		})
	}
}

// checkSameLayout compares a parsed layout with a planned one, whose frames
// carry bytes the parsed one leaves in the file.
func checkSameLayout(t *testing.T, parsed, planned *formats.Layout) {
	t.Helper()
	stripped := *planned
	stripped.Files = nil
	for _, f := range planned.Files {
		f.Extents = slices.Clone(f.Extents)
		for i := range f.Extents {
			f.Extents[i].Bytes = nil
		}
		stripped.Files = append(stripped.Files, f)
	}
	if !reflect.DeepEqual(parsed, &stripped) {
		t.Fatalf("parsed layout\n%+v\ndiffers from the planned one\n%+v", parsed, &stripped)
	}
}

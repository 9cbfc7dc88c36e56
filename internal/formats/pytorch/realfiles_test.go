package pytorch

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
)

func i64s(b []byte) []int64 {
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

// Every real checkpoint parses into a consistent layout, or is refused
// with the class its kind calls for.
func TestRealCheckpoints(t *testing.T) {
	files := realFiles(t, "pytorch")
	if broken := testdataDir("bad"); broken != "" {
		for name, b := range realFiles(t, "bad") {
			if strings.HasSuffix(name, ".pt") {
				files["../bad/"+name] = b
			}
		}
	}
	parsed := 0
	for _, name := range sortedKeys(files) {
		t.Run(name, func(t *testing.T) {
			l, err := parse(files[name])
			switch {
			case strings.HasSuffix(name, ".jit"):
				wantClass(t, err, errs.UnsupportedVersion, "TorchScript", "code/")
				return
			case strings.Contains(name, "legacy"):
				wantClass(t, err, errs.UnsupportedVersion, "legacy")
				return
			case strings.Contains(name, "broken"):
				wantClass(t, err, errs.InvalidArchive, "not a PyTorch checkpoint")
				return
			case err != nil:
				t.Fatal(err)
			}
			parsed++
			mem := map[string][]byte{"m.pt": files[name]}
			if err := formattest.CheckLayout(l, mem); err != nil {
				t.Fatal(err)
			}
			if len(l.Tensors) == 0 {
				t.Fatal("no tensors")
			}
		})
	}
	if parsed < 50 {
		t.Errorf("only %d real checkpoints parsed", parsed)
	}
}

// What the real files hold, as torch.load(weights_only=True) reports it.
func TestRealCheckpointContents(t *testing.T) {
	files := realFiles(t, "pytorch")
	t.Run("candle-test", func(t *testing.T) {
		l, err := parse(files["candle-test.pt"])
		if err != nil {
			t.Fatal(err)
		}
		data, _ := formattest.TensorData(l, map[string][]byte{"m.pt": files["candle-test.pt"]})
		if tn := l.Tensors[0]; tn.Name != "test" || tn.DType != "I64" || !slices.Equal(tn.Shape, []int64{2, 4}) ||
			!slices.Equal(i64s(data[0]), []int64{1, 2, 3, 4, 5, 6, 7, 8}) || l.Files[0].Meta != nil {
			t.Fatalf("tensor %+v holds %v, meta %v", tn, i64s(data[0]), l.Files[0].Meta)
		}
	})
	t.Run("fortran order is a view of a bare storage", func(t *testing.T) {
		l, err := parse(files["candle-fortran_tensor_3d.pth"])
		if err != nil {
			t.Fatal(err)
		}
		fm, err := DecodeMeta(l.Files[0].Meta)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Tensors) != 1 || l.Tensors[0].Name != "<storage:m.pt/data/0>" || len(fm.Views) != 1 || !slices.Equal(fm.Storages, []string{l.Tensors[0].Name}) {
			t.Fatalf("tensors %+v, meta %+v", l.Tensors, fm)
		}
		v := fm.Views[0]
		if v.Name != "tensor_fortran" || v.DType != "I64" || !slices.Equal(v.Shape, []int64{2, 3, 4}) || !slices.Equal(v.Stride, []int64{1, 2, 6}) {
			t.Fatalf("view %+v", v)
		}
		data, _ := formattest.TensorData(l, map[string][]byte{"m.pt": files["candle-fortran_tensor_3d.pth"]})
		got, err := v.Gather(data[0])
		if err != nil {
			t.Fatal(err)
		}
		want := make([]int64, 24) // torch: t.contiguous().flatten()
		for i := range want {
			want[i] = int64(i + 1)
		}
		if !slices.Equal(i64s(got), want) {
			t.Fatalf("gathered %v", i64s(got))
		}
	})
	t.Run("values that are not tensors", func(t *testing.T) {
		l, err := parse(files["burn/src__pytorch__tests__reader__test_data__checkpoint.pt"])
		if err != nil {
			t.Fatal(err)
		}
		fm, _ := DecodeMeta(l.Files[0].Meta)
		if fm.Other == nil || fm.Other.Count != 2 || !slices.Equal(fm.Other.Names, []string{"epoch", "loss"}) {
			t.Fatalf("other %+v", fm.Other)
		}
		var names []string
		for _, tn := range l.Tensors {
			names = append(names, tn.Name)
		}
		want := []string{"model_state_dict.fc1.weight", "model_state_dict.fc1.bias", "model_state_dict.fc2.weight",
			"model_state_dict.fc2.bias", "optimizer_state_dict.state.0.momentum_buffer"}
		if !slices.Equal(names, want) {
			t.Fatalf("names %q", names)
		}
	})
	t.Run("dtypes", func(t *testing.T) {
		for file, dtype := range map[string]string{"bfloat16": "BF16", "bool": "BOOL", "float16": "F16", "float64": "F64",
			"int16": "I16", "int32": "I32", "int8": "I8", "uint8": "U8", "scalar": "F32", "empty": "F32"} {
			l, err := parse(files["burn/src__pytorch__tests__reader__test_data__"+file+".pt"])
			if err != nil {
				t.Fatal(err)
			}
			if l.Tensors[0].DType != dtype || l.Tensors[0].Name != "tensor" {
				t.Errorf("%s: %+v", file, l.Tensors[0])
			}
		}
	})
}

// The shared conformance suite, over real files and planned ones.
func TestConformance(t *testing.T) {
	var samples []formattest.Sample
	if testdataDir("pytorch") != "" {
		files := realFiles(t, "pytorch")
		for _, name := range []string{"candle-test.pt", "candle-fortran_tensor_3d.pth",
			"burn/pytorch-tests__tests__config__weights_with_config.pt", "burn/src__pytorch__tests__reader__test_data__empty.pt",
			"burn/src__pytorch__tests__reader__test_data__parameter.pt"} {
			samples = append(samples, formattest.Sample{Name: name, Files: map[string][]byte{"model.pt": files[name]}})
		}
	}
	samples = append(samples,
		formattest.Sample{Name: "planned", Files: planned(t, mixed, PlanOptions{})},
		formattest.Sample{Name: "planned sharded", Files: planned(t, mixed, PlanOptions{MaxShardSize: 80})},
		formattest.Sample{Name: "views", Files: map[string][]byte{"views.pt": viewsCheckpoint()}},
	)
	formattest.Suite{Codec: Codec, Samples: samples, Replan: func(l *formats.Layout) (*formats.Layout, error) {
		return Plan(l.Tensors, PlanOptions{})
	}, MaxTruncations: 256, MaxBitFlips: 2048}.Run(t)
}

// mixed are tensors of every dtype torch has a storage class for, an empty
// one and a scalar.
var mixed = []formats.Tensor{
	{Name: "embed.weight", DType: "BF16", Shape: []int64{8, 4}, Size: 64},
	{Name: "layers.0.w", DType: "F32", Shape: []int64{3, 5}, Size: 60},
	{Name: "layers.0.b", DType: "F16", Shape: []int64{5}, Size: 10},
	{Name: "step", DType: "I64", Shape: []int64{}, Size: 8},
	{Name: "empty", DType: "F64", Shape: []int64{0, 3}, Size: 0},
	{Name: "mask", DType: "BOOL", Shape: []int64{7}, Size: 7},
	{Name: "ñame", DType: "C64", Shape: []int64{2}, Size: 16},
	{Name: "fp8", DType: "F8_E4M3", Shape: []int64{3}, Size: 3},
}

func planned(t testing.TB, tensors []formats.Tensor, opts PlanOptions) map[string][]byte {
	t.Helper()
	l, err := Plan(tensors, opts)
	if err != nil {
		t.Fatal(err)
	}
	data := make([][]byte, len(tensors))
	for i, tn := range tensors {
		data[i] = formattest.Content(tn.Name, tn.Size)
	}
	files, err := formattest.Materialize(l, data)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// viewsCheckpoint holds one storage of 12 floats seen as a whole matrix
// (a), its transpose (b), a row (c), and again under another name (d), and
// a storage only partly used (e).
func viewsCheckpoint() []byte {
	p := newPickle().dict()
	p.str("a").rebuild("FloatStorage", "0", 12, 0, []int64{3, 4}, []int64{4, 1})
	p.str("b").rebuild("FloatStorage", "0", 12, 0, []int64{4, 3}, []int64{1, 4})
	p.str("c").rebuild("FloatStorage", "0", 12, 4, []int64{4}, []int64{1})
	p.str("d").rebuild("FloatStorage", "0", 12, 0, []int64{12}, []int64{1})
	p.str("e").rebuild("FloatStorage", "1", 6, 2, []int64{2, 2}, []int64{1, 2})
	return checkpointOf(p.end(), map[string][]byte{"0": f32(12), "1": f32(6)})
}

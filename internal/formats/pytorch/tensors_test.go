package pytorch

import (
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

func names(ts []formats.Tensor) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func floats(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// parseMeta parses b and returns its layout, Meta and tensor bytes.
func parseMeta(t *testing.T, b []byte) (*formats.Layout, *FileMeta, [][]byte) {
	t.Helper()
	l, err := parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := formattest.CheckLayout(l, map[string][]byte{"m.pt": b}); err != nil {
		t.Fatal(err)
	}
	fm, err := DecodeMeta(l.Files[0].Meta)
	if err != nil {
		t.Fatal(err)
	}
	data, err := formattest.TensorData(l, map[string][]byte{"m.pt": b})
	if err != nil {
		t.Fatal(err)
	}
	return l, fm, data
}

// A storage that is one tensor is that tensor; the other tensors over it,
// and partly used storages, are views, read out as torch's .contiguous()
// would give them.
func TestViewsAndSharedStorages(t *testing.T) {
	l, fm, data := parseMeta(t, viewsCheckpoint())
	if got := names(l.Tensors); !slices.Equal(got, []string{"a", "<storage:m.pt/data/1>"}) {
		t.Fatalf("layout tensors %q", got)
	}
	if !slices.Equal(fm.Storages, []string{"<storage:m.pt/data/1>"}) || fm.Other != nil {
		t.Fatalf("meta %+v", fm)
	}
	want := map[string]struct {
		at   int
		vals []float32
	}{
		"b": {1, []float32{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}},
		"c": {2, []float32{4, 5, 6, 7}},
		"d": {3, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
		"e": {4, []float32{2, 4, 3, 5}},
	}
	if len(fm.Views) != len(want) {
		t.Fatalf("views %+v", fm.Views)
	}
	for _, v := range fm.Views {
		w := want[v.Name]
		src := data[slices.Index(names(l.Tensors), v.Storage)]
		got, err := v.Gather(src)
		if err != nil {
			t.Fatal(err)
		}
		if v.At != w.at || !slices.Equal(floats(got), w.vals) {
			t.Errorf("view %s at %d reads %v, want %v at %d", v.Name, v.At, floats(got), w.vals, w.at)
		}
	}
}

// Layout tensors follow the state dict's order even when a view of a
// storage comes before the tensor that is that storage.
func TestLayoutOrder(t *testing.T) {
	p := newPickle().dict()
	p.str("v").rebuild("FloatStorage", "1", 4, 1, []int64{2}, []int64{1})
	p.str("o1").rebuild("FloatStorage", "0", 4, 0, []int64{4}, []int64{1})
	p.str("o2").rebuild("FloatStorage", "1", 4, 0, []int64{2, 2}, []int64{2, 1})
	l, fm, _ := parseMeta(t, checkpointOf(p.end(), map[string][]byte{"0": f32(4), "1": f32(4)}))
	if got := names(l.Tensors); !slices.Equal(got, []string{"o1", "o2"}) || len(fm.Views) != 1 || fm.Views[0].At != 0 || fm.Views[0].Storage != "o2" {
		t.Fatalf("layout %q, views %+v", got, fm.Views)
	}
}

// Parameters, _rebuild_tensor_v3 over an untyped storage, tensors with
// attributes (_rebuild_from_type_v2) and the state_dict's _metadata.
func TestRebuildFunctions(t *testing.T) {
	p := newPickle().dict()
	p.str("param").global("torch._utils", "_rebuild_parameter").op(opMark).
		rebuild("FloatStorage", "0", 4, 0, []int64{4}, []int64{1}).op(opNewTrue, opEmptyDict, opTuple, opReduce)
	p.str("fp8").global("torch._utils", "_rebuild_tensor_v3").op(opMark).storage("UntypedStorage", "1", 3).int(0).tuple(3).tuple(1).
		op(opNewFalse, opEmptyDict).global("torch", "float8_e4m3fn").op(opTuple, opReduce)
	p.str("typed").global("torch._tensor", "_rebuild_from_type_v2").op(opMark).global("torch._utils", "_rebuild_tensor_v2").
		global("torch.nn.parameter", "Parameter").op(opMark).storage("HalfStorage", "2", 2).int(0).tuple(2).tuple(1).
		op(opNewFalse, opEmptyDict, opTuple, opEmptyDict).str("attr").int(1).op(opSetItem, opTuple, opReduce)
	pkl := append(p.b, opSetItems, opEmptyDict)
	pkl = append(pkl, newPickle().str("_metadata").op(opEmptyDict).b[2:]...)
	pkl = append(pkl, opSetItem, opBuild, opStop)
	l, fm, _ := parseMeta(t, checkpointOf(pkl, map[string][]byte{"0": f32(4), "1": {1, 2, 3}, "2": {0, 0x3c, 0, 0x40}}))
	want := []formats.Tensor{{Name: "param", DType: "F32", Shape: []int64{4}, Size: 16},
		{Name: "fp8", DType: "F8_E4M3", Shape: []int64{3}, Size: 3}, {Name: "typed", DType: "F16", Shape: []int64{2}, Size: 4}}
	for i, w := range want {
		if g := l.Tensors[i]; g.Name != w.Name || g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) || g.Size != w.Size {
			t.Errorf("tensor %d: %+v, want %+v", i, g, w)
		}
	}
	if len(l.Tensors) != 3 || !fm.empty() {
		t.Fatalf("%d tensors, meta %+v (the _metadata attribute is not a value of the state dict)", len(l.Tensors), fm)
	}
}

// Names are dict keys and list indexes joined with "."; the values that
// are not tensors are counted.
func TestNamesAndOtherValues(t *testing.T) {
	p := newPickle().op(opEmptyDict, opMark)
	p.str("layers").op(opEmptyList, opMark).rebuild("FloatStorage", "0", 4, 0, []int64{4}, []int64{1})
	p.rebuild("FloatStorage", "1", 4, 0, []int64{4}, []int64{1}).op(opAppends)
	p.str("state").op(opEmptyDict).int(3).op(opEmptyDict).str("exp_avg").rebuild("FloatStorage", "2", 4, 0, []int64{4}, []int64{1}).
		op(opSetItem, opSetItem)
	p.str("epoch").int(7)
	p.str("lr").op(opBinFloat, 0x3f, 0x50, 0x62, 0x4d, 0xd2, 0xf1, 0xa9, 0xfc)
	p.str("name").op(opShortBinString, 2, 'h', 'i')
	p.str("device").global("torch", "device").str("cuda").int(0).op(opTuple2, opReduce)
	p.str("shape").global("torch", "Size").int(2).int(3).op(opTuple2, opTuple1, opReduce)
	p.str("blob").global("_codecs", "encode").str("\u00e9x").str("latin1").op(opTuple2, opReduce)
	p.str("tags").global("builtins", "set").op(opEmptyList, opTuple1, opReduce)
	p.str("z").global("builtins", "complex").int(1).int(2).op(opTuple2, opReduce)
	p.str("dtype").global("torch", "bfloat16")
	p.str("big").op(opLong1, 9, 0, 0, 0, 0, 0, 0, 0, 0, 1)
	p.str("none").op(opNone)
	pkl := p.op(opSetItems, opStop).b
	l, fm, _ := parseMeta(t, checkpointOf(pkl, map[string][]byte{"0": f32(4), "1": f32(4), "2": f32(4)}))
	if got := names(l.Tensors); !slices.Equal(got, []string{"layers.0", "layers.1", "state.3.exp_avg"}) {
		t.Fatalf("names %q", got)
	}
	wantOther := []string{"epoch", "lr", "name", "device", "shape.0", "shape.1", "blob", "tags", "z", "dtype", "big", "none"}
	if fm.Other == nil || fm.Other.Count != len(wantOther) || !slices.Equal(fm.Other.Names, wantOther) {
		t.Fatalf("other %+v, want %q", fm.Other, wantOther)
	}
}

func TestNamingRefusals(t *testing.T) {
	tensor := func(p *pk, key string) *pk { return p.rebuild("FloatStorage", key, 4, 0, []int64{4}, []int64{1}) }
	for _, tc := range []struct {
		name  string
		pkl   []byte
		class errs.Class
		want  string
	}{
		{"two tensors with one name", tensor(tensor(newPickle().dict().str("a.b"), "0").str("a").op(opEmptyDict).str("b"), "1").
			op(opSetItem).end(), errs.SchemaError, `"a.b"`},
		{"a tensor named like a bare storage", tensor(tensor(newPickle().dict().str("<storage:m.pt/data/1>"), "0").
			str("v"), "1").b[:0], errs.SchemaError, ""},
		{"a tensor under a tuple key", tensor(newPickle().dict().int(1).int(2).op(opTuple2), "0").end(), errs.SchemaError, "no name"},
		{"a tensor in a set", tensor(newPickle().global("builtins", "set").op(opEmptyList), "0").op(opAppend, opTuple1, opReduce).stop(),
			errs.SchemaError, "set"},
		{"a dict key that cannot be hashed", newPickle().dict().op(opEmptyList).int(1).end(), errs.SchemaError, "hash"},
	} {
		if len(tc.pkl) == 0 {
			// A tensor named "<storage:m.pt/data/1>" beside a partial view of
			// storage 1, which becomes that bare storage.
			p := newPickle().dict().str("<storage:m.pt/data/1>").rebuild("FloatStorage", "0", 4, 0, []int64{4}, []int64{1})
			p.str("v").rebuild("FloatStorage", "1", 4, 1, []int64{2}, []int64{1})
			tc.pkl, tc.want = p.end(), "<storage:m.pt/data/1>"
		}
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(checkpointOf(tc.pkl, map[string][]byte{"0": f32(4), "1": f32(4)}))
			wantClass(t, err, tc.class, tc.want)
		})
	}
}

// A checkpoint of one bare tensor names it with the empty path.
func TestRootTensor(t *testing.T) {
	pkl := newPickle().rebuild("FloatStorage", "0", 4, 0, []int64{2, 2}, []int64{2, 1}).stop()
	l, _, _ := parseMeta(t, checkpointOf(pkl, map[string][]byte{"0": f32(4)}))
	if len(l.Tensors) != 1 || l.Tensors[0].Name != "" || !slices.Equal(l.Tensors[0].Shape, []int64{2, 2}) {
		t.Fatalf("tensors %+v", l.Tensors)
	}
}

// A storage that only an ignored value holds (a tensor attribute) still
// has its bytes stored, as a bare storage.
func TestUnreachableStorage(t *testing.T) {
	p := newPickle().dict().str("w").rebuild("FloatStorage", "0", 4, 0, []int64{4}, []int64{1}).op(opSetItems)
	p.op(opEmptyDict).str("hidden").rebuild("FloatStorage", "1", 4, 0, []int64{4}, []int64{1}).op(opSetItem, opBuild)
	l, fm, _ := parseMeta(t, checkpointOf(p.stop(), map[string][]byte{"0": f32(4), "1": f32(4)}))
	if got := names(l.Tensors); !slices.Equal(got, []string{"w", "<storage:m.pt/data/1>"}) || len(fm.Views) != 0 {
		t.Fatalf("tensors %q, meta %+v", got, fm)
	}
}

// A string key is spelled by hashKey's short way as appendKey spells it,
// and one longer than the budget's room is refused by the budget.
func TestHashKeyOfString(t *testing.T) {
	for _, s := range []string{"", "model.layers.0.weight", strings.Repeat("é", 300)} {
		got, err := hashKey(s, 8, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := appendKey(nil, s, 8, 1<<62, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Fatalf("key %q spelled %q, appendKey %q", s, got, want)
		}
		// In a tuple, the string is spelled the same way.
		if tk, _ := hashKey(newTuple([]value{s}), 8, nil); !strings.Contains(tk, got) {
			t.Fatalf("tuple key %q does not hold %q", tk, got)
		}
	}
	budget := (formats.Limits{MaxParseMemory: 1024}).Budget(pkg, "m.pt", 0)
	_, err := hashKey(strings.Repeat("k", 1024), 8, budget)
	wantClass(t, err, errs.SizeLimitExceeded)
}

// The machine hands APPENDS and SETITEMS a view of its stack and cuts
// tuples' items from shared chunks (keep): what it builds must not change
// as later values are pushed where those items were.
func TestPickleValuesOutliveTheStack(t *testing.T) {
	p := newPickle()
	p.op(opMark).int(1).int(2).op(opTuple)                   // (1, 2)
	p.op(opEmptyList, opMark).int(3).int(4).op(opAppends)    // [3, 4]
	p.op(opEmptyDict, opMark).str("k").int(5).op(opSetItems) // {"k": 5}
	p.op(opMark).int(6).int(7).int(8).op(opTuple)            // pushed where the items above were
	p.op(opMark).int(9).op(opTuple)
	p.op(opTuple3, opTuple3)
	v, err := unpickle(p.stop(), 0, "x", DefaultLimits, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// ((1, 2), [3, 4], ({"k": 5}, (6, 7, 8), (9,)))
	outer := v.(tuple).items
	inner := outer[2].(tuple).items
	got := []any{outer[0].(tuple).items, outer[1].(*list).items, inner[0].(*dict).keys, inner[0].(*dict).vals,
		inner[1].(tuple).items, inner[2].(tuple).items}
	want := []any{[]value{int64(1), int64(2)}, []value{int64(3), int64(4)}, []value{"k"}, []value{int64(5)},
		[]value{int64(6), int64(7), int64(8)}, []value{int64(9)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("built %v, want %v", got, want)
	}
}

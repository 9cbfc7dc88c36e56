package gguf

import (
	"bytes"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/testenv"
)

func TestKVJSONRoundTrip(t *testing.T) {
	kvs := []KV{
		{Key: "u8", Value: ArrayValue(TypeUint8, []uint64{0, 255})},
		{Key: "i8", Value: ArrayValue(TypeInt8, []uint64{0x80, 0x7f, 0xff})},
		{Key: "u16", Value: Uint16Value(65535)},
		{Key: "i16", Value: ArrayValue(TypeInt16, []uint64{0x8000})},
		{Key: "u32", Value: Uint32Value(math.MaxUint32)},
		{Key: "i32", Value: Int32Value(math.MinInt32)},
		{Key: "f32", Value: ArrayValue(TypeFloat32, []uint64{0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001, 1, 0x3dcccccd})},
		{Key: "bool", Value: ArrayValue(TypeBool, []uint64{0, 1})},
		{Key: "str", Value: StringValue("tab\tquote\"back\\slash\x01 ü 😀")},
		{Key: "strs", Value: StringArray([]string{"", "\xff\x00", "ok"})},
		{Key: "no strs", Value: StringArray([]string{})},
		{Key: "u64", Value: Uint64Value(math.MaxUint64)},
		{Key: "i64", Value: ArrayValue(TypeInt64, []uint64{1 << 63})},
		{Key: "f64", Value: ArrayValue(TypeFloat64, []uint64{math.Float64bits(0.1), 0x7ff8000000000000, 0x7ff0000000000001, math.Float64bits(-0.0)})},
	}
	j := EncodeKVs(kvs)
	back, err := DecodeKVs(j)
	if err != nil {
		t.Fatalf("%v\n%s", err, j)
	}
	for i := range kvs {
		if kvs[i].Key != back[i].Key || !bytes.Equal(appendKV(nil, kvs[i]), appendKV(nil, back[i])) {
			t.Errorf("%s: %+v came back as %+v", kvs[i].Key, kvs[i].Value, back[i].Value)
		}
	}
	if !bytes.Equal(EncodeKVs(back), j) {
		t.Error("encoding is not canonical")
	}
	for _, want := range []string{`"type":"i32","value":-2147483648`, `"nan"`, `"nan:0xffc00001"`, `"-inf"`, `-0`, `{"base64":"/wA="}`, `0.1`} {
		if !strings.Contains(string(j), want) {
			t.Errorf("JSON lacks %s:\n%s", want, j)
		}
	}
}

func TestDecodeKVsRefusesBadJSON(t *testing.T) {
	for _, in := range []string{
		``, `{}`, `[{"type":"u8","value":1}]`, `[{"key":"","type":"u8","value":1}]`,
		`[{"key":"a","type":"u8","value":1},{"key":"a","type":"u8","value":1}]`,
		`[{"key":"a","type":"u8","value":256}]`, `[{"key":"a","type":"i8","value":-129}]`,
		`[{"key":"a","type":"u9","value":1}]`, `[{"key":"a","type":"arr","elem":"arr","value":[]}]`,
		`[{"key":"a","type":"arr","elem":"u8","value":1}]`, `[{"key":"a","type":"u8","elem":"u8","value":1}]`,
		`[{"key":"a","type":"f32","value":"1"}]`, `[{"key":"a","type":"f32","value":1e39}]`,
		`[{"key":"a","type":"bool","value":1}]`, `[{"key":"a","type":"str","value":1}]`,
		`[{"key":"a","type":"str","value":{"base64":"!"}}]`, `[{"key":"a","type":"u8","value":1,"x":1}]`,
		`[] []`, `[{"key":"a","type":"u64","value":-1}]`, `[{"key":"a","type":"f64","value":"nan:0xzz"}]`,
	} {
		if _, err := DecodeKVs([]byte(in)); errs.ClassOf(err) != errs.SchemaError {
			t.Errorf("%s: err = %v, want schema_error", in, err)
		}
	}
}

func TestPlanSplitsAsGGUFSplit(t *testing.T) {
	tensors := make([]formats.Tensor, 5)
	for i := range tensors {
		tensors[i] = spec{Name: string(rune('a' + i)), DType: "F32", Shape: []int64{int64(10 * (i + 1))}}.Tensor(t, TensorSize)
	}
	// Sizes 40, 80, 120, 160, 200, padded to 32: 64, 96, 128, 160, 224.
	cases := []struct {
		opts  PlanOptions
		files []int // tensors per file
	}{
		{PlanOptions{}, []int{5}},
		{PlanOptions{SplitMaxTensors: 2}, []int{2, 2, 1}},
		{PlanOptions{SplitMaxTensors: 5}, []int{5}},
		{PlanOptions{SplitMaxSize: 160}, []int{2, 1, 1, 1}},
		{PlanOptions{SplitMaxSize: 10}, []int{1, 1, 1, 1, 1}},
		{PlanOptions{SplitMaxSize: 1 << 30}, []int{5}},
	}
	for _, c := range cases {
		l, err := Plan(tensors, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, f := range l.Files {
			n := 0
			for _, e := range f.Extents {
				if e.Kind == formats.TensorData {
					n++
				}
			}
			got = append(got, n)
		}
		if !reflect.DeepEqual(got, c.files) {
			t.Errorf("%+v: files of %v tensors, want %v", c.opts, got, c.files)
		}
	}
}

func TestPlanAlignment(t *testing.T) {
	specs := mixedSpecs[:3]
	for _, c := range []struct {
		in    []KV
		align int64
		want  int64
		kv    bool // general.alignment written
	}{
		{nil, 0, 32, false},
		{nil, 32, 32, false},
		{nil, 64, 64, true},
		{nil, 1, 1, true},
		{[]KV{{Key: KeyAlignment, Value: Uint32Value(16)}}, 0, 16, true},
		{[]KV{{Key: KeyAlignment, Value: Uint32Value(16)}}, 32, 32, true},
		{[]KV{{Key: "a", Value: Uint32Value(1)}, {Key: KeyAlignment, Value: Uint32Value(16)}, {Key: "b", Value: Uint32Value(2)}}, 128, 128, true},
	} {
		files := generate(t, specs, PlanOptions{KVs: c.in, Alignment: c.align})
		l, err := parseFiles(files)
		if err != nil {
			t.Fatal(err)
		}
		f := l.Files[0]
		if f.Meta[MetaAlignment] != strconv.FormatInt(c.want, 10) {
			t.Errorf("%+v: alignment %s, want %d", c, f.Meta[MetaAlignment], c.want)
		}
		for _, e := range f.Extents {
			if e.Kind == formats.TensorData && e.Offset%c.want != 0 {
				t.Errorf("%+v: tensor at %d", c, e.Offset)
			}
		}
		kvs, _ := DecodeKVs([]byte(f.Meta[MetaKV]))
		has := false
		for i, kv := range kvs {
			if kv.Key == KeyAlignment {
				has = true
				if len(c.in) == 3 && i != 1 {
					t.Errorf("general.alignment moved to %d", i)
				}
			}
		}
		if has != c.kv {
			t.Errorf("%+v: general.alignment written: %v", c, has)
		}
	}
}

func TestPlanRefuses(t *testing.T) {
	ok := spec{Name: "a", DType: "F32", Shape: []int64{2}}.Tensor(t, TensorSize)
	cases := []struct {
		name    string
		tensors []formats.Tensor
		opts    PlanOptions
		class   errs.Class
	}{
		{"long name", []formats.Tensor{{Name: strings.Repeat("n", 64), DType: "F32", Shape: []int64{1}, Size: 4}}, PlanOptions{}, errs.SchemaError},
		{"duplicate", []formats.Tensor{ok, ok}, PlanOptions{}, errs.SchemaError},
		{"unknown dtype", []formats.Tensor{{Name: "a", DType: "U8", Shape: []int64{1}, Size: 1}}, PlanOptions{}, errs.UnsupportedVersion},
		{"wrong size", []formats.Tensor{{Name: "a", DType: "F32", Shape: []int64{2}, Size: 4}}, PlanOptions{}, errs.SchemaError},
		{"5 dims", []formats.Tensor{{Name: "a", DType: "F32", Shape: []int64{1, 1, 1, 1, 1}, Size: 4}}, PlanOptions{}, errs.SchemaError},
		{"not whole blocks", []formats.Tensor{{Name: "a", DType: "Q4_0", Shape: []int64{2, 16}, Size: 18}}, PlanOptions{}, errs.SchemaError},
		{"alignment 3", []formats.Tensor{ok}, PlanOptions{Alignment: 3}, errs.SchemaError},
		{"alignment 2^32", []formats.Tensor{ok}, PlanOptions{Alignment: 1 << 32}, errs.SchemaError},
		{"bad general.alignment", []formats.Tensor{ok}, PlanOptions{KVs: []KV{{Key: KeyAlignment, Value: Uint64Value(32)}}}, errs.SchemaError},
		{"version 4", []formats.Tensor{ok}, PlanOptions{Version: 4}, errs.UnsupportedVersion},
		{"name leaves", []formats.Tensor{ok}, PlanOptions{Name: "../x"}, errs.PathTraversal},
		{"duplicate key", []formats.Tensor{ok}, PlanOptions{KVs: []KV{mixedKVs[0], mixedKVs[0]}}, errs.SchemaError},
		{"nested array", []formats.Tensor{ok}, PlanOptions{KVs: []KV{{Key: "k", Value: Value{Type: TypeArray, Array: true}}}}, errs.UnsupportedVersion},
	}
	for _, c := range cases {
		if _, err := Plan(c.tensors, c.opts); errs.ClassOf(err) != c.class {
			t.Errorf("%s: err = %v, want %s", c.name, err, c.class.Key())
		}
	}
}

// A file llama.cpp wrote comes out of Plan byte for byte when planned again
// with its own key/values and tensors.
func TestPlanReproducesRealFile(t *testing.T) {
	name := "llama-2-tiny-random.gguf"
	b, ok := realFiles(t)[name]
	if !ok {
		testenv.Missing(t, "%s not in shared/testdata/gguf", name)
	}
	files := map[string][]byte{name: b}
	l, err := parseFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	data, err := formattest.TensorData(l, files)
	if err != nil {
		t.Fatal(err)
	}
	planned, err := replan(l)
	if err != nil {
		t.Fatal(err)
	}
	written, err := formattest.Materialize(planned, data)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(written["model.gguf"], b) {
		t.Fatalf("planned file (%d bytes) differs from %s (%d bytes)", len(written["model.gguf"]), name, len(b))
	}
}

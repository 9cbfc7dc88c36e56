package gguf

import (
	"encoding/json"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats/formattest"
)

// maxFuzzZeros bounds the zero bytes a fuzz input may append.
const maxFuzzZeros = 1 << 20

// maxReplanSize bounds the files whose tensors are planned again.
const maxReplanSize = 64 << 10

// FuzzParse parses frame (a header, key/values and tensor infos) followed
// by zeros zero bytes (padding and tensor data: Parse reads only the
// padding, and keeping the data out of the input keeps inputs small enough
// to mutate and minimize).
//
// Whatever the bytes: no panic, every error has a class, every accepted
// layout covers the file exactly, and (for small files) planning its
// tensors and key/values again gives a file that parses back to the same
// tensors, key/values and version.
func FuzzParse(f *testing.F) {
	for _, b := range fuzzSeedFiles(f) {
		frame, zeros := splitFrame(f, b)
		f.Add(frame, zeros)
	}
	f.Fuzz(func(t *testing.T, frame []byte, zeros uint32) {
		file := make([]byte, len(frame)+int(zeros%maxFuzzZeros))
		copy(file, frame)
		files := map[string][]byte{"model.gguf": file}
		l, err := parseFiles(files)
		if !formattest.CheckParsed(t, l, err, files) {
			return
		}
		if len(file) > maxReplanSize {
			return
		}
		back := formattest.CheckReplanned(t, l, files, replan, parseFiles)
		for _, k := range []string{MetaVersion, MetaAlignment} {
			if back.Files[0].Meta[k] != l.Files[0].Meta[k] {
				t.Fatalf("%s: %q planned again as %q", k, l.Files[0].Meta[k], back.Files[0].Meta[k])
			}
		}
		// Planned as one file, the model loses only its split keys.
		kvs, _ := DecodeKVs([]byte(l.Files[0].Meta[MetaKV]))
		want, _, _ := planKVs(kvs, 0)
		if got := back.Files[0].Meta[MetaKV]; got != string(EncodeKVs(want)) {
			t.Fatalf("key/values %s planned again as %s", l.Files[0].Meta[MetaKV], got)
		}
	})
}

// splitFrame cuts a valid file into its header frame and the number of
// bytes after it, which the fuzz target refills with zeros.
func splitFrame(t testing.TB, b []byte) ([]byte, uint32) {
	l, err := parseFiles(map[string][]byte{"model.gguf": b})
	if err != nil {
		t.Fatal(err)
	}
	end := l.Files[0].Extents[0].Size
	return b[:end], uint32(int64(len(b)) - end)
}

// fuzzSeedFiles are small generated files and the real files with their
// arrays cut to a few elements (a 100,000-token vocabulary is too big an
// input to mutate), keeping every key, type and tensor info.
func fuzzSeedFiles(t testing.TB) [][]byte {
	seeds := [][]byte{
		generate(t, mixedSpecs, PlanOptions{KVs: mixedKVs})["model.gguf"],
		generate(t, nil, PlanOptions{})["model.gguf"],
		generate(t, mixedSpecs[:3], PlanOptions{Version: 2, Alignment: 8})["model.gguf"],
		good().bytes(),
	}
	if testdataDir("gguf") == "" {
		return seeds
	}
	for _, b := range realFiles(t) {
		files := map[string][]byte{"model.gguf": b}
		l, err := parseFiles(files)
		if err != nil {
			t.Fatal(err)
		}
		kvs, err := DecodeKVs([]byte(l.Files[0].Meta[MetaKV]))
		if err != nil {
			t.Fatal(err)
		}
		for i := range kvs {
			v := &kvs[i].Value
			if v.Array && v.Len() > 4 {
				v.Strs = v.Strs[:min(len(v.Strs), 4)]
				v.Raw = v.Raw[:min(len(v.Raw), 4*v.Type.width())]
			}
		}
		for i := range l.Tensors { // shrink the data section too
			l.Tensors[i].Shape = []int64{int64(len(l.Tensors[i].Shape))}
			l.Tensors[i].DType, l.Tensors[i].Size = "F32", 4*l.Tensors[i].Shape[0]
		}
		planned, err := Plan(l.Tensors, PlanOptions{KVs: kvs})
		if err != nil {
			t.Fatal(err)
		}
		data := make([][]byte, len(l.Tensors))
		for i, tn := range l.Tensors {
			data[i] = make([]byte, tn.Size)
		}
		written, err := formattest.Materialize(planned, data)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, written["model.gguf"])
	}
	return seeds
}

// FuzzDecodeKVs decodes arbitrary key/value JSON: no input may panic, a
// refusal is schema_error, and what decodes encodes to JSON that decodes
// to the same values. The array elements DecodeKVs walks in place are the
// ones encoding/json finds.
func FuzzDecodeKVs(f *testing.F) {
	f.Add(EncodeKVs([]KV{{Key: "a", Value: StringValue("x")}, {Key: "b", Value: ArrayValue(TypeUint8, []uint64{1, 2, 255})}}))
	f.Add([]byte(`[{"key":"s","type":"arr","elem":"str","value":[ "a\"],", {"base64":"/w=="} ]}]`))
	f.Add([]byte(`[{"key":"f","type":"arr","elem":"f32","value":["nan", "inf", 1.5e3, [1]]}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		kvs, err := DecodeKVs(b)
		if err != nil {
			if errs.ClassOf(err) != errs.SchemaError {
				t.Fatalf("refusal of class %v: %v", errs.ClassOf(err), err)
			}
			return
		}
		var raw []struct {
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(b, &raw); err != nil || len(raw) != len(kvs) {
			t.Fatalf("decoded %d key/values from JSON encoding/json reads as %d (%v)", len(kvs), len(raw), err)
		}
		for i, kv := range kvs {
			var elems []json.RawMessage
			if kv.Value.Array && (json.Unmarshal(raw[i].Value, &elems) != nil || len(elems) != kv.Value.Len()) {
				t.Fatalf("key %q: %d elements, encoding/json finds %d", kv.Key, kv.Value.Len(), len(elems))
			}
		}
		back, err := DecodeKVs(EncodeKVs(kvs))
		if err != nil {
			t.Fatalf("re-encoded key/values do not decode: %v", err)
		}
		for i := range kvs {
			if back[i].Key != kvs[i].Key || !back[i].Value.Equal(kvs[i].Value) {
				t.Fatalf("key %q changed through EncodeKVs", kvs[i].Key)
			}
		}
	})
}

// FuzzPlainInteger: the fast path for integer elements agrees with
// parseJSONNumber wherever it answers.
func FuzzPlainInteger(f *testing.F) {
	for _, s := range []string{"0", "-0", "255", "256", "-128", "-129", "127", "128", "65535", "-32768", "4294967295",
		"999999999999999999", "9223372036854775807", "-9223372036854775808", "18446744073709551615", "01", "1e3", "-", ""} {
		f.Add(s, uint8(TypeUint8))
	}
	f.Fuzz(func(t *testing.T, s string, typ uint8) {
		vt := ValueType(typ % uint8(typeCount))
		if vt == TypeArray || vt == TypeString || vt == TypeBool || vt == TypeFloat32 || vt == TypeFloat64 {
			return
		}
		got, ok := plainInteger(vt, []byte(s))
		if !ok {
			return
		}
		want, err := parseJSONNumber(vt, s)
		if err != nil || got != want {
			t.Fatalf("%s %q: fast path %d, parseJSONNumber %d (%v)", vt, s, got, want, err)
		}
	})
}

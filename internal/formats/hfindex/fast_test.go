package hfindex

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

var fastCases = map[string]bool{ // index → whether the fast path takes it
	`{"metadata": {"total_size": 123}, "weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors", "c": "model-1.safetensors"}}`: true,
	"{\n  \"weight_map\" : {\n    \"a\" :\"m.safetensors\" ,\"b\":\"sub/m.safetensors\"\n  },\n  \"metadata\":null\n}\n":                    true,
	`{"metadata": {"format": "pt", "total_size": 0}, "weight_map": {"a": "m.safetensors"}}`:                                                 true,
	`{"weight_map": {"é 中": "m.safetensors"}}`:                                                                                              true,
	`{"weight_map": {"a\u0041": "m.safetensors"}}`:                                                                                          false, // an escape
	`{"weight_map": {"a": "m.safetensors", "a": "m.safetensors"}}`:                                                                          false, // a repeated tensor
	`{"weight_map": {"a": "../m.safetensors"}}`:                                                                                             false, // a shard outside
	`{"weight_map": {}}`: false,
	`{"metadata": {"total_size": 1.5}, "weight_map": {"a": "m.safetensors"}}`:      false,
	`{"metadata": {"total_size": 01}, "weight_map": {"a": "m.safetensors"}}`:       false,
	`{"metadata": {"total_size": "1"}, "weight_map": {"a": "m.safetensors"}}`:      false,
	`{"metadata": {"total_size": 99999999999999999999}, "weight_map": {"a": "m"}}`: false,
	`{"metadata": {"x": {"y": 1}}, "weight_map": {"a": "m.safetensors"}}`:          false, // nested metadata
	`{"metadata": {}, "metadata": {}, "weight_map": {"a": "m.safetensors"}}`:       false,
	`{"other": 1, "weight_map": {"a": "m.safetensors"}}`:                           false,
	`{"weight_map": {"a": "m.safetensors"}} x`:                                     false,
	`{"weight_map": {"a": "m.safetensors"},}`:                                      false,
	`{"weight_map": {"a": 1}}`:                                                     false,
	`{"weight_map": {"a": "m.safetensors"}`:                                        false,
}

// The fast path takes the usual spellings, gives what encoding/json's
// reading gives (offsets included), and leaves everything else to it.
func TestParseFast(t *testing.T) {
	for in, takes := range fastCases {
		got, ok := parseFast("d/model.safetensors.index.json", []byte(in), "test")
		if ok != takes {
			t.Errorf("%s: fast path takes it: %v, want %v", in, ok, takes)
			continue
		}
		if ok {
			want, err := parseJSON("d/model.safetensors.index.json", []byte(in), "test")
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("%s: fast path gives\n%+v\nencoding/json gives\n%+v (%v)", in, got, want, err)
			}
		}
	}
	// A large index of the usual spelling is read by the fast path.
	var b strings.Builder
	b.WriteString(`{"metadata": {"total_size": 1000}, "weight_map": {`)
	for i := range 5000 {
		if i > 0 {
			b.WriteString(",\n")
		}
		b.WriteString(`"model.layers.` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + `.` + strconv.Itoa(i) + `.weight": "model-0000` + strconv.Itoa(i%3) + `.safetensors"`)
	}
	b.WriteString("}}")
	got, ok := parseFast("model.safetensors.index.json", []byte(b.String()), "test")
	want, err := parseJSON("model.safetensors.index.json", []byte(b.String()), "test")
	if !ok || err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("a large index: fast %v, encoding/json %v, equal %v", ok, err, reflect.DeepEqual(got, want))
	}
}

// Whatever the fast path takes, encoding/json's reading takes too, with
// the same result.
func FuzzParseFast(f *testing.F) {
	for in := range fastCases {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !utf8.Valid(b) || tooDeep(b) >= 0 {
			return // Parse refuses these before either reading
		}
		got, ok := parseFast("d/i.json", b, "test")
		if !ok {
			return
		}
		want, err := parseJSON("d/i.json", b, "test")
		if err != nil {
			t.Fatalf("the fast path takes %q, encoding/json refuses it: %v", b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: fast path gives\n%+v\nencoding/json gives\n%+v", b, got, want)
		}
	})
}

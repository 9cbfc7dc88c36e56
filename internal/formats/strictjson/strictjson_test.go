package strictjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats/strictjson"
)

// decode builds the value the reader reads, as encoding/json's Decoder
// with UseNumber would (a repeated key keeps its last value).
func decode(r *strictjson.Reader) (any, error) {
	switch c := r.Peek(); c {
	case '{':
		m := map[string]any{}
		err := r.Object(func(key string, _ int64) error {
			v, err := decode(r)
			m[key] = v
			return err
		})
		return m, err
	case '[':
		a := []any{}
		err := r.Array(func() error {
			v, err := decode(r)
			a = append(a, v)
			return err
		})
		return a, err
	case '"':
		return r.Str()
	case 't', 'f':
		err := r.SkipValue()
		return c == 't', err
	case 'n':
		return nil, r.SkipValue()
	default:
		at := r.Offset()
		if err := r.SkipValue(); err != nil {
			return nil, err
		}
		return json.Number(r.Since(at)), nil
	}
}

// read reads b whole, as one value.
func read(b []byte) (any, error) {
	r, err := strictjson.New(b, 0, "test", "f.json")
	if err != nil {
		return nil, err
	}
	v, err := decode(r)
	if err == nil {
		err = r.End()
	}
	return v, err
}

func reference(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() || dec.InputOffset() < int64(len(bytes.TrimRight(b, " \t\r\n"))) {
		return nil, errs.New(errs.SchemaError, "test", "bytes after the value")
	}
	return v, nil
}

// FuzzReader is differential: what the reader takes, encoding/json takes
// and reads to the same value; what it refuses, encoding/json refuses too,
// unless it is one of the refusals that are the reader's own (bytes that
// are not UTF-8, a lone UTF-16 surrogate, nesting past MaxDepth). Every
// refusal has the class of its kind.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		`{"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}`,
		`{"__metadata__": {"format": "pt"}, "b\u00e9\"\\/\b\f\n\r\t": [1.5e3, -0, true, false, null]}`,
		`{"weight_map": {"x": "model-00001-of-00002.safetensors"}, "metadata": {"total_size": 12}}   `,
		`"\ud83d\ude00"`, `"\ud800"`, `[1,]`, `{"a":1,"a":2}`, `01`, `1.`, `-`, `{"a" 1}`, "\"\xff\"",
		strings.Repeat("[", 70) + strings.Repeat("]", 70),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := read(b)
		want, werr := reference(b)
		if err != nil {
			switch c := errs.ClassOf(err); {
			case c == errs.SizeLimitExceeded && strings.Contains(err.Error(), "nested deeper"):
			case c != errs.SchemaError:
				t.Fatalf("refused with class %v: %v", c, err)
			case werr == nil && utf8.Valid(b) && !strings.Contains(err.Error(), "surrogate"):
				t.Fatalf("refused what encoding/json reads (%v): %v", want, err)
			}
			return
		}
		if werr != nil {
			t.Fatalf("took what encoding/json refuses (%v): %v", werr, got)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("read %#v, encoding/json %#v", got, want)
		}
	})
}

// Errors carry the file offset of the byte at fault.
func TestErrorsCarryTheOffset(t *testing.T) {
	r, err := strictjson.New([]byte(`{"a": [1, 2,]}`), 100, "test", "f.json")
	if err != nil {
		t.Fatal(err)
	}
	err = r.SkipValue()
	var e *errs.Error
	if !errors.As(err, &e) || e.Class != errs.SchemaError || e.Offset != 112 || e.Path != "f.json" {
		t.Fatalf("%v, want schema_error at offset 112 of f.json", err)
	}
}

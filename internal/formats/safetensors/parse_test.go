package safetensors

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
)

const oneTensor = `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`

func single(header string, dataLen int) map[string][]byte {
	return map[string][]byte{"model.safetensors": rawFile(header, make([]byte, dataLen))}
}

func lengthOnly(n uint64, rest string) map[string][]byte {
	return map[string][]byte{"model.safetensors": append(binary.LittleEndian.AppendUint64(nil, n), rest...)}
}

func TestParseRefusesMalformedFiles(t *testing.T) {
	cases := []struct {
		name  string
		files map[string][]byte
		want  errs.Class
		msg   string // a part of the message, when it matters
	}{
		{"empty file", map[string][]byte{"model.safetensors": nil}, errs.InvalidArchive, "shorter than the 8-byte"},
		{"truncated length", map[string][]byte{"model.safetensors": {8, 0, 0}}, errs.InvalidArchive, ""},
		{"header too large", lengthOnly(MaxHeaderSize+1, "{}"), errs.SizeLimitExceeded, "limit"},
		{"header length 2^64-1", lengthOnly(1<<64-1, "{}"), errs.SizeLimitExceeded, ""},
		{"header past end of file", lengthOnly(100, "{}"), errs.InvalidArchive, "passes the end"},
		{"truncated header", map[string][]byte{"model.safetensors": rawFile(oneTensor, make([]byte, 8))[:30]}, errs.InvalidArchive, ""},
		{"truncated data", single(oneTensor, 5), errs.InvalidArchive, "pass the end"},
		{"empty header", single("", 0), errs.SchemaError, "JSON"},
		{"not JSON", single(`{"a":`, 0), errs.SchemaError, "JSON"},
		{"not an object", single(`[1,2]   `, 0), errs.SchemaError, "not a JSON object"},
		{"string header", single(`"abc"`, 0), errs.SchemaError, "not a JSON object"},
		{"not UTF-8", single("{\"\xff\":1}", 0), errs.SchemaError, "UTF-8"},
		{"data after the object", single(`{} {}`, 0), errs.SchemaError, ""},
		{"NUL padding", single("{}\x00\x00", 0), errs.SchemaError, ""},
		{"trailing comma", single(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},}`, 8), errs.SchemaError, ""},
		{"entry not an object", single(`{"a":[1]}`, 0), errs.SchemaError, "entry must be an object"},
		{"overlapping offsets", single(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12), errs.InvalidArchive, "overlaps"},
		{"same range twice", single(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8), errs.InvalidArchive, "overlaps"},
		{"gap", single(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}}`, 20), errs.InvalidArchive, "unused bytes"},
		{"not starting at 0", single(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12), errs.InvalidArchive, "unused bytes"},
		{"trailing bytes", single(oneTensor, 9), errs.InvalidArchive, "after the last tensor"},
		{"data but no tensors", single(`{}`, 1), errs.InvalidArchive, "after the last tensor"},
		{"end before begin", single(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, 8), errs.InvalidArchive, "end before"},
		{"offset past 2^64", single(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,99999999999999999999999]}}`, 8), errs.InvalidArchive, ""},
		{"duplicate tensor", single(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 2), errs.SchemaError, "duplicate key"},
		{"duplicate field", single(`{"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 1), errs.SchemaError, "duplicate key"},
		{"field in other case", single(`{"a":{"Dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 1), errs.SchemaError, "unknown key"},
		{"unknown field", single(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}}`, 1), errs.SchemaError, "unknown key"},
		{"missing field", single(`{"a":{"dtype":"U8","shape":[1]}}`, 0), errs.SchemaError, "lacks"},
		{"unknown dtype", single(`{"a":{"dtype":"Q4_K","shape":[1],"data_offsets":[0,1]}}`, 1), errs.UnsupportedVersion, "Q4_K"},
		{"dtype not a string", single(`{"a":{"dtype":4,"shape":[1],"data_offsets":[0,1]}}`, 1), errs.SchemaError, ""},
		{"shape overflow", single(`{"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,1]}}`, 1), errs.SchemaError, "overflow"},
		{"shape bits overflow", single(`{"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,1]}}`, 1), errs.SchemaError, "overflow"},
		{"dimension past int64", single(`{"a":{"dtype":"U8","shape":[0,99999999999999999999],"data_offsets":[0,0]}}`, 0), errs.SchemaError, "out of range"},
		{"negative dimension", single(`{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}`, 0), errs.SchemaError, "non-negative"},
		{"fractional dimension", single(`{"a":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}}`, 1), errs.SchemaError, "non-negative integer"},
		{"exponent offset", single(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1e0]}}`, 1), errs.SchemaError, "non-negative integer"},
		{"size mismatch", single(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8), errs.SchemaError, "needs 12"},
		{"F4 odd count", single(`{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}`, 2), errs.SchemaError, "whole number of bytes"},
		{"three offsets", single(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,1]}}`, 1), errs.SchemaError, "[begin, end]"},
		{"one offset", single(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[0]}}`, 0), errs.SchemaError, "[begin, end]"},
		{"metadata is an array", single(`{"__metadata__":["x"]}`, 0), errs.SchemaError, "__metadata__"},
		{"metadata value not a string", single(`{"__metadata__":{"format":1}}`, 0), errs.SchemaError, "must be a string"},
		{"metadata nested", single(`{"__metadata__":{"format":{"a":"b"}}}`, 0), errs.SchemaError, "must be a string"},
		{"metadata duplicate key", single(`{"__metadata__":{"k":"a","k":"b"}}`, 0), errs.SchemaError, "duplicate"},
		{"metadata twice", single(`{"__metadata__":null,"__metadata__":null}`, 0), errs.SchemaError, "duplicate"},
		{"lone surrogate", single(`{"\ud800":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}`, 0), errs.SchemaError, "surrogate"},
		{"bad escape", single(`{"\x":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}`, 0), errs.SchemaError, "escape"},
		{"control byte in name", single("{\"a\tb\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}", 0), errs.SchemaError, "control"},
		{"leading zero", single(`{"a":{"dtype":"U8","shape":[01],"data_offsets":[0,1]}}`, 1), errs.SchemaError, ""},
		{"not a safetensors name", map[string][]byte{"model.bin": nil}, errs.SchemaError, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			paths := slices.Sorted(maps.Keys(c.files))
			_, err := Codec.Parse(formattest.NewMemDir(c.files), paths)
			checkRefusal(t, err, c.want, c.msg)
		})
	}
}

func checkRefusal(t *testing.T, err error, want errs.Class, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted, want %s", want.Key())
	}
	if got := errs.ClassOf(err); got != want {
		t.Fatalf("class %s, want %s: %v", got.Key(), want.Key(), err)
	}
	if !strings.HasPrefix(err.Error(), "safetensors: ") {
		t.Errorf("message lacks the package prefix: %v", err)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Errorf("message %q does not say %q", err, msg)
	}
}

func TestParseAcceptsWhatRealWritersDo(t *testing.T) {
	const reordered = `{"b":{"shape":[1],"data_offsets":[4,5],"dtype":"U8"},"a":{"data_offsets":[0,4],"dtype":"I32","shape":[]}}`
	cases := []struct {
		name   string
		header string
		data   int
		check  func(t *testing.T, l *formats.Layout)
	}{
		{"metadata null", `{"__metadata__":null,"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 1, func(t *testing.T, l *formats.Layout) {
			if l.Files[0].Meta != nil {
				t.Errorf("Meta %v, want nil", l.Files[0].Meta)
			}
		}},
		{"metadata", `{"__metadata__":{"format":"pt","é":"\u00e9\n"}}`, 0, func(t *testing.T, l *formats.Layout) {
			if want := map[string]string{"format": "pt", "é": "é\n"}; !maps.Equal(l.Files[0].Meta, want) {
				t.Errorf("Meta %v, want %v", l.Files[0].Meta, want)
			}
		}},
		{"padding kept in the frame", oneTensor + "      ", 8, func(t *testing.T, l *formats.Layout) {
			if got := l.Files[0].Extents[0].Size; got != 8+int64(len(oneTensor))+6 {
				t.Errorf("frame of %d bytes", got)
			}
		}},
		{"any key order, any tensor order", reordered, 5, func(t *testing.T, l *formats.Layout) {
			if l.Tensors[0].Name != "a" || l.Tensors[1].Name != "b" || l.Files[0].Extents[2].Offset != int64(8+len(reordered)+4) {
				t.Errorf("tensors %+v, extents %+v", l.Tensors, l.Files[0].Extents)
			}
		}},
		{"zero-size tensors share an offset", `{"z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"y":{"dtype":"F32","shape":[2,0],"data_offsets":[4,4]},"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, 4, func(t *testing.T, l *formats.Layout) {
			var names []string
			for _, tn := range l.Tensors {
				names = append(names, tn.Name)
			}
			if !slices.Equal(names, []string{"a", "y", "z"}) || len(l.Files[0].Extents) != 4 {
				t.Errorf("tensors %v, extents %+v", names, l.Files[0].Extents)
			}
		}},
		{"no tensors", `{}      `, 0, func(t *testing.T, l *formats.Layout) {
			if len(l.Tensors) != 0 || len(l.Files[0].Extents) != 1 {
				t.Errorf("layout %+v", l)
			}
		}},
		{"escaped names", `{"a\"b\\c\u00e9\ud83d\ude00":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 1, func(t *testing.T, l *formats.Layout) {
			if l.Tensors[0].Name != "a\"b\\cé😀" {
				t.Errorf("name %q", l.Tensors[0].Name)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := parseFiles(single(c.header, c.data))
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, l)
		})
	}
}

func TestParseLayout(t *testing.T) {
	files := generate(t, mixedSpecs, PlanOptions{Metadata: map[string]string{"format": "pt"}})
	l, err := parseFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	if l.Format != "safetensors" || len(l.Files) != 1 || len(l.Tensors) != len(mixedSpecs) {
		t.Fatalf("layout %+v", l)
	}
	f := l.Files[0]
	if f.Path != "model.safetensors" || f.Index || f.Meta["format"] != "pt" {
		t.Errorf("file %+v", f)
	}
	if f.Extents[0].Kind != formats.Frame || f.Extents[0].Offset != 0 || f.Extents[0].Size%8 != 0 {
		t.Errorf("frame %+v", f.Extents[0])
	}
	for i, s := range mixedSpecs {
		tn, e := l.Tensors[i], f.Extents[i+1]
		if tn.Name != s.Name || tn.DType != s.DType || !slices.Equal(tn.Shape, s.Shape) {
			t.Errorf("tensor %d: %+v, want %+v", i, tn, s)
		}
		if e.Kind != formats.TensorData || e.Tensor != i || e.Size != tn.Size {
			t.Errorf("extent %d: %+v", i+1, e)
		}
	}
}

func TestParseIndependentFiles(t *testing.T) {
	files := map[string][]byte{
		"a.safetensors":     rawFile(oneTensor, make([]byte, 8)),
		"sub/b.safetensors": rawFile(`{"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{7}),
	}
	l, err := parseFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Files) != 2 || l.Files[1].Path != "sub/b.safetensors" || l.Tensors[1].Name != "b" || l.Files[1].Extents[1].Tensor != 1 {
		t.Fatalf("layout %+v", l)
	}
	files["c.safetensors"] = files["a.safetensors"]
	_, err = parseFiles(files)
	checkRefusal(t, err, errs.SchemaError, `tensor "a" is also in a.safetensors`)
}

// Shards' headers are read two at a time, but a refusal is always that of
// the first bad shard in path order, as a parse one shard at a time gives.
func TestParseRefusesTheFirstBadShard(t *testing.T) {
	files := map[string][]byte{}
	for i := range 6 {
		files[fmt.Sprintf("s%d.safetensors", i)] = rawFile(fmt.Sprintf(`{"t%d":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, i), []byte{1})
	}
	files["s3.safetensors"] = lengthOnly(1<<40, "")["model.safetensors"]
	files["s4.safetensors"] = rawFile(`{"t4":{"dtype":"U8","shape":[2],"data_offsets":[0,1]}}`, []byte{1})
	files["s5.safetensors"] = []byte{1, 2}
	for range 20 {
		_, err := parseFiles(files)
		checkRefusal(t, err, errs.SizeLimitExceeded, "s3.safetensors")
	}
	delete(files, "s3.safetensors")
	_, err := parseFiles(files)
	checkRefusal(t, err, errs.SchemaError, "s4.safetensors")
}

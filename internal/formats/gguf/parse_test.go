package gguf

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/testenv"
)

// raw builds a GGUF file piece by piece, so that a test can break any part.
type raw struct {
	magic    string
	version  uint32
	nTensors *uint64 // nil: len(infos)
	nKV      *uint64 // nil: len(kvs)
	kvs      [][]byte
	infos    [][]byte
	align    int64 // header padding; 0: none
	data     []byte
}

func ptr(v uint64) *uint64 { return &v }

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func gstr(s string) []byte { return append(le64(uint64(len(s))), s...) }

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func kvRaw(key string, typ uint32, payload ...[]byte) []byte {
	return cat(gstr(key), le32(typ), cat(payload...))
}

func infoRaw(name string, ne []uint64, typ uint32, off uint64) []byte {
	b := cat(gstr(name), le32(uint32(len(ne))))
	for _, d := range ne {
		b = append(b, le64(d)...)
	}
	return cat(b, le32(typ), le64(off))
}

func (r raw) bytes() []byte {
	nT, nKV := uint64(len(r.infos)), uint64(len(r.kvs))
	if r.nTensors != nil {
		nT = *r.nTensors
	}
	if r.nKV != nil {
		nKV = *r.nKV
	}
	b := cat([]byte(r.magic), le32(r.version), le64(nT), le64(nKV), cat(r.kvs...), cat(r.infos...))
	if r.align > 0 {
		for int64(len(b))%r.align != 0 {
			b = append(b, 0)
		}
	}
	return append(b, r.data...)
}

// good is a valid file: one key/value, two F32 tensors of 4 elements, each
// padded to 32 bytes.
func good() raw {
	return raw{
		magic: "GGUF", version: 3,
		kvs:   [][]byte{kvRaw("general.architecture", 8, gstr("llama"))},
		infos: [][]byte{infoRaw("a", []uint64{4}, 0, 0), infoRaw("b", []uint64{4}, 0, 32)},
		align: 32,
		data:  make([]byte, 64),
	}
}

func with(f func(*raw)) map[string][]byte {
	r := good()
	f(&r)
	return map[string][]byte{"model.gguf": r.bytes()}
}

func TestGoodRawFileParses(t *testing.T) {
	l, err := parseFiles(with(func(*raw) {}))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Tensors) != 2 || l.Tensors[1].Size != 16 || l.Files[0].Size != 160+64 {
		t.Fatalf("layout %+v", l)
	}
}

func TestBadInput(t *testing.T) {
	u16 := func(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
	cases := []struct {
		name  string
		files map[string][]byte
		class errs.Class
	}{
		{"wrong magic", with(func(r *raw) { r.magic = "GGML" }), errs.InvalidArchive},
		{"empty file", map[string][]byte{"model.gguf": {}}, errs.InvalidArchive},
		{"version 0", with(func(r *raw) { r.version = 0 }), errs.UnsupportedVersion},
		{"version 1", with(func(r *raw) { r.version = 1 }), errs.UnsupportedVersion},
		{"version 4", with(func(r *raw) { r.version = 4 }), errs.UnsupportedVersion},
		{"byte-swapped v3", with(func(r *raw) { r.version = 0x03000000 }), errs.UnsupportedVersion},
		{"tensor count past the file", with(func(r *raw) { r.nTensors = ptr(1 << 40) }), errs.InvalidArchive},
		{"negative tensor count", with(func(r *raw) { r.nTensors = ptr(1<<64 - 2) }), errs.InvalidArchive},
		{"key/value count past the file", with(func(r *raw) { r.nKV = ptr(1 << 40) }), errs.InvalidArchive},
		{"key length past the file", with(func(r *raw) { r.kvs[0] = cat(le64(1<<50), []byte("general")) }), errs.InvalidArchive},
		{"string value past the file", with(func(r *raw) { r.kvs[0] = kvRaw("k", 8, le64(1<<40)) }), errs.InvalidArchive},
		{"array length past the file", with(func(r *raw) { r.kvs[0] = kvRaw("k", 9, le32(4), le64(1<<61)) }), errs.InvalidArchive},
		{"string array length past the file", with(func(r *raw) { r.kvs[0] = kvRaw("k", 9, le32(8), le64(1<<60)) }), errs.InvalidArchive},
		{"nested array", with(func(r *raw) { r.kvs[0] = kvRaw("k", 9, le32(9), le64(1)) }), errs.UnsupportedVersion},
		{"unknown value type", with(func(r *raw) { r.kvs[0] = kvRaw("k", 13, le32(0)) }), errs.UnsupportedVersion},
		{"unknown array element type", with(func(r *raw) { r.kvs[0] = kvRaw("k", 9, le32(99), le64(0)) }), errs.UnsupportedVersion},
		{"duplicate key", with(func(r *raw) { r.kvs = append(r.kvs, r.kvs[0]) }), errs.SchemaError},
		{"empty key", with(func(r *raw) { r.kvs[0] = kvRaw("", 4, le32(1)) }), errs.SchemaError},
		{"key not UTF-8", with(func(r *raw) { r.kvs[0] = kvRaw("k\xff", 4, le32(1)) }), errs.SchemaError},
		{"bool 2", with(func(r *raw) { r.kvs[0] = kvRaw("k", 7, []byte{2}) }), errs.SchemaError},
		{"alignment 0", with(func(r *raw) { r.kvs[0] = kvRaw(KeyAlignment, 4, le32(0)) }), errs.SchemaError},
		{"alignment 48", with(func(r *raw) { r.kvs[0] = kvRaw(KeyAlignment, 4, le32(48)) }), errs.SchemaError},
		{"alignment as u64", with(func(r *raw) { r.kvs[0] = kvRaw(KeyAlignment, 10, le64(32)) }), errs.SchemaError},
		{"empty tensor name", with(func(r *raw) { r.infos[0] = infoRaw("", []uint64{4}, 0, 0) }), errs.SchemaError},
		{"tensor name of 64 bytes", with(func(r *raw) { r.infos[0] = infoRaw(strings.Repeat("x", 64), []uint64{4}, 0, 0) }), errs.SchemaError},
		{"tensor name with NUL", with(func(r *raw) { r.infos[0] = infoRaw("a\x00b", []uint64{4}, 0, 0) }), errs.SchemaError},
		{"duplicate tensor name", with(func(r *raw) { r.infos[1] = infoRaw("a", []uint64{4}, 0, 32) }), errs.SchemaError},
		{"5 dimensions", with(func(r *raw) { r.infos[0] = infoRaw("a", []uint64{4, 1, 1, 1, 1}, 0, 0) }), errs.SchemaError},
		{"negative dimension", with(func(r *raw) { r.infos[0] = infoRaw("a", []uint64{1 << 63}, 0, 0) }), errs.SchemaError},
		{"element count overflows", with(func(r *raw) { r.infos[0] = infoRaw("a", []uint64{1 << 40, 1 << 40}, 0, 0) }), errs.SchemaError},
		{"byte size overflows", with(func(r *raw) { r.infos[0] = infoRaw("a", []uint64{1 << 61}, 0, 0) }), errs.SchemaError},
		{"unknown ggml type", with(func(r *raw) { r.infos[0] = infoRaw("a", []uint64{4}, 99, 0) }), errs.UnsupportedVersion},
		{"removed ggml type Q4_2", with(func(r *raw) { r.infos[0] = infoRaw("a", []uint64{32}, 4, 0) }), errs.UnsupportedVersion},
		{"removed ggml type Q4_0_4_4", with(func(r *raw) { r.infos[0] = infoRaw("a", []uint64{32}, 31, 0) }), errs.UnsupportedVersion},
		{"row not whole Q4_0 blocks", with(func(r *raw) { r.infos[0] = infoRaw("a", []uint64{33}, 2, 0) }), errs.SchemaError},
		{"unaligned offset", with(func(r *raw) { r.infos[1] = infoRaw("b", []uint64{4}, 0, 16) }), errs.InvalidArchive},
		{"offsets out of order", with(func(r *raw) {
			r.infos[0], r.infos[1] = infoRaw("a", []uint64{4}, 0, 32), infoRaw("b", []uint64{4}, 0, 0)
		}), errs.InvalidArchive},
		{"gap between tensors", with(func(r *raw) { r.infos[1] = infoRaw("b", []uint64{4}, 0, 64); r.data = make([]byte, 96) }), errs.InvalidArchive},
		{"tensor past the end", with(func(r *raw) { r.data = r.data[:40] }), errs.InvalidArchive},
		{"huge offset", with(func(r *raw) { r.infos[1] = infoRaw("b", []uint64{4}, 0, 1<<63) }), errs.InvalidArchive},
		{"bytes after the data", with(func(r *raw) { r.data = make([]byte, 65) }), errs.InvalidArchive},
		{"ends in the header padding", with(func(r *raw) { r.align, r.data = 0, nil }), errs.InvalidArchive},
		{"no tensors, bytes after the infos", with(func(r *raw) { r.infos, r.data = nil, make([]byte, 40) }), errs.InvalidArchive},
		{"truncated in a key", func() map[string][]byte {
			b := good().bytes()
			return map[string][]byte{"model.gguf": b[:30]}
		}(), errs.InvalidArchive},
		{"split.no as u32", with(func(r *raw) { r.kvs = append(r.kvs, kvRaw(KeySplitNo, 4, le32(0))) }), errs.SchemaError},
		{"split.count 3 in a file not named as a shard", with(func(r *raw) {
			r.kvs = append(r.kvs, kvRaw(KeySplitNo, 2, u16(0)), kvRaw(KeySplitCount, 2, u16(3)), kvRaw(KeySplitTensors, 5, le32(2)))
		}), errs.SchemaError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := formattest.ParseRecovering(Codec, c.files, formattest.ClaimedPaths(Codec, c.files))
			if !errors.Is(err, c.class) {
				t.Fatalf("err = %v (layout %v), want %s", err, l != nil, c.class.Key())
			}
			if errs.ClassOf(err) != c.class {
				t.Fatalf("class %s, want %s", errs.ClassOf(err).Key(), c.class.Key())
			}
			if !strings.HasPrefix(err.Error(), "gguf: ") {
				t.Errorf("message %q does not name the package", err)
			}
		})
	}
}

func TestHeaderOverTheLimitIsSizeLimitExceeded(t *testing.T) {
	big := make([]byte, MaxHeaderSize+1024)
	copy(big, cat([]byte("GGUF"), le32(3), le64(0), le64(1), kvRaw("k", 8, le64(MaxHeaderSize))))
	_, err := parseFiles(map[string][]byte{"model.gguf": big})
	if errs.ClassOf(err) != errs.SizeLimitExceeded {
		t.Fatalf("err = %v, want size_limit_exceeded", err)
	}
}

func TestTruncatedOllamaFileIsRefused(t *testing.T) {
	dir := testdataDir("bad")
	if dir == "" {
		testenv.Missing(t, "no shared/testdata/bad above the working directory")
	}
	b, err := os.ReadFile(filepath.Join(dir, "ollama-test-truncated.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = parseFiles(map[string][]byte{"test.gguf": b})
	if errs.ClassOf(err) != errs.InvalidArchive {
		t.Fatalf("err = %v, want invalid_archive", err)
	}
}

// splitModel writes mixedSpecs as three shards of "m".
func splitModel(t *testing.T) map[string][]byte {
	t.Helper()
	return generate(t, mixedSpecs, PlanOptions{Name: "m", KVs: mixedKVs, SplitMaxTensors: 4})
}

func TestSplitModel(t *testing.T) {
	files := splitModel(t)
	if len(files) != 3 {
		t.Fatalf("%d files", len(files))
	}
	l, err := parseFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Tensors) != len(mixedSpecs) || l.Files[1].Path != "m-00002-of-00003.gguf" {
		t.Fatalf("layout %+v", l.Files)
	}
	// The first shard has every key/value, the others only the split keys.
	for i, f := range l.Files {
		kvs, err := DecodeKVs([]byte(f.Meta[MetaKV]))
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, kv := range kvs {
			keys = append(keys, kv.Key)
		}
		want := len(mixedKVs) + 3
		if i > 0 {
			want = 3
		}
		if len(keys) != want || keys[len(keys)-3] != KeySplitNo || keys[len(keys)-2] != KeySplitTensors || keys[len(keys)-1] != KeySplitCount {
			t.Errorf("%s: keys %v", f.Path, keys)
		}
	}
}

func TestBadSplitModels(t *testing.T) {
	without := func(files map[string][]byte, p string) map[string][]byte {
		out := map[string][]byte{}
		for k, v := range files {
			if k != p {
				out[k] = v
			}
		}
		return out
	}
	renamed := func(files map[string][]byte, from, to string) map[string][]byte {
		out := without(files, from)
		out[to] = files[from]
		return out
	}
	files := splitModel(t)
	two := generate(t, mixedSpecs, PlanOptions{Name: "m", KVs: mixedKVs, SplitMaxTensors: 5})
	other := generate(t, []spec{{Name: "x", DType: "F32", Shape: []int64{2}}}, PlanOptions{Name: "other"})
	cases := map[string]map[string][]byte{
		"missing middle shard": without(files, "m-00002-of-00003.gguf"),
		"missing last shard":   without(files, "m-00003-of-00003.gguf"),
		"duplicated shard":     renamed(files, "m-00003-of-00003.gguf", "m-00004-of-00003.gguf"),
		"shard copied under another number": func() map[string][]byte {
			out := without(files, "m-00003-of-00003.gguf")
			out["m-00003-of-00003.gguf"] = files["m-00002-of-00003.gguf"]
			return out
		}(),
		"shards of two splits": func() map[string][]byte {
			out := without(files, "m-00002-of-00003.gguf")
			out["m-00002-of-00002.gguf"] = two["m-00002-of-00002.gguf"]
			return out
		}(),
		"renamed to fewer shards": renamed(without(files, "m-00003-of-00003.gguf"), "m-00002-of-00003.gguf", "m-00002-of-00002.gguf"),
		"a tensor in two models": func() map[string][]byte {
			out := generate(t, mixedSpecs[:2], PlanOptions{Name: "a"})
			out["b.gguf"] = generate(t, mixedSpecs[1:3], PlanOptions{Name: "b"})["b.gguf"]
			return out
		}(),
	}
	for name, fs := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := parseFiles(fs)
			if errs.ClassOf(err) != errs.SchemaError {
				t.Fatalf("err = %v, want schema_error", err)
			}
		})
	}
	// Two models with different tensors may share a directory (a model and
	// its multimodal projector).
	both := map[string][]byte{}
	for k, v := range files {
		both[k] = v
	}
	both["other.gguf"] = other["other.gguf"]
	if _, err := parseFiles(both); err != nil {
		t.Fatalf("a split model beside another model: %v", err)
	}
}

func TestTypeTable(t *testing.T) {
	// Block geometry of every type, from ggml's type traits.
	want := map[string][2]int64{
		"F32": {1, 4}, "F16": {1, 2}, "Q4_0": {32, 18}, "Q4_1": {32, 20}, "Q5_0": {32, 22}, "Q5_1": {32, 24},
		"Q8_0": {32, 34}, "Q8_1": {32, 36}, "Q2_K": {256, 84}, "Q3_K": {256, 110}, "Q4_K": {256, 144},
		"Q5_K": {256, 176}, "Q6_K": {256, 210}, "Q8_K": {256, 292}, "IQ2_XXS": {256, 66}, "IQ2_XS": {256, 74},
		"IQ3_XXS": {256, 98}, "IQ1_S": {256, 50}, "IQ4_NL": {32, 18}, "IQ3_S": {256, 110}, "IQ2_S": {256, 82},
		"IQ4_XS": {256, 136}, "I8": {1, 1}, "I16": {1, 2}, "I32": {1, 4}, "I64": {1, 8}, "F64": {1, 8},
		"IQ1_M": {256, 56}, "BF16": {1, 2}, "TQ1_0": {256, 54}, "TQ2_0": {256, 66}, "MXFP4": {32, 17},
		"NVFP4": {64, 36}, "Q1_0": {128, 18}, "Q2_0": {64, 18},
	}
	if len(want) != len(ggmlTypes) {
		t.Fatalf("%d types, want %d", len(ggmlTypes), len(want))
	}
	for name, w := range want {
		blk, size, ok := BlockSize(name)
		if !ok || blk != w[0] || size != w[1] {
			t.Errorf("%s: block %d of %d bytes, want %d of %d", name, blk, size, w[0], w[1])
		}
	}
	for id, name := range removedTypes {
		if _, err := lookupType(id); errs.ClassOf(err) != errs.UnsupportedVersion || !strings.Contains(err.Error(), name) {
			t.Errorf("removed type %d: %v", id, err)
		}
	}
	// Every type round-trips through a file.
	var specs []spec
	for name, w := range want {
		specs = append(specs, spec{Name: "t." + name, DType: name, Shape: []int64{2, w[0] * 3}})
	}
	files := generate(t, specs, PlanOptions{})
	l, err := parseFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range l.Tensors {
		w := want[tn.DType]
		if tn.Name != "t."+tn.DType || tn.Size != 2*3*w[1] {
			t.Errorf("%s: %s of %d bytes", tn.Name, tn.DType, tn.Size)
		}
	}
}

var _ = formats.Frame

// Counts that fit in a large file but not in MaxHeaderSize are refused
// before anything is allocated for them.
func TestCountsBoundedByTheHeaderLimit(t *testing.T) {
	big := make([]byte, 2*MaxHeaderSize)
	for name, head := range map[string][]byte{
		"key/values":   cat([]byte("GGUF"), le32(3), le64(0), le64(MaxHeaderSize/13+1)),
		"tensors":      cat([]byte("GGUF"), le32(3), le64(MaxHeaderSize/25+1), le64(0)),
		"string array": cat([]byte("GGUF"), le32(3), le64(0), le64(1), kvRaw("k", 9, le32(8), le64(MaxHeaderSize/8+1))),
	} {
		file := append(head, big[len(head):]...)
		if _, err := parseFiles(map[string][]byte{"model.gguf": file}); errs.ClassOf(err) != errs.SizeLimitExceeded {
			t.Errorf("%s: err = %v, want size_limit_exceeded", name, err)
		}
	}
}

package objects

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
)

func TestDigestTextRoundTrip(t *testing.T) {
	d := Sum([]byte("x"))
	p, err := ParseDigest(d.String())
	if err != nil || p != d {
		t.Fatalf("ParseDigest(%s) = %v, %v", d, p, err)
	}
	for _, bad := range []string{"", d.String()[:63], strings.ToUpper(d.String()), d.String()[:63] + "g"} {
		if _, err := ParseDigest(bad); !errors.Is(err, errs.SchemaError) {
			t.Errorf("ParseDigest(%q): %v", bad, err)
		}
	}
	var back struct{ D Digest }
	if err := json.Unmarshal([]byte(`{"D":"`+d.String()+`"}`), &back); err != nil || back.D != d {
		t.Errorf("JSON round trip: %v, %v", back.D, err)
	}
	for _, bad := range []string{`""`, `"` + strings.ToUpper(d.String()) + `"`, `"` + d.String()[:63] + `"`, `12`} {
		if err := json.Unmarshal([]byte(`{"D":`+bad+`}`), &back); !errors.Is(err, errs.SchemaError) {
			t.Errorf("JSON digest %s: %v", bad, err)
		}
	}
	if !IsDigestPrefix(d.String()[:8]) || IsDigestPrefix(d.String()[:7]) || IsDigestPrefix("ABCDEF12") {
		t.Error("IsDigestPrefix")
	}
	if err := Verify([]byte("y"), d, "thing"); !errors.Is(err, errs.IntegrityError) {
		t.Errorf("Verify: %v", err)
	}
}

func TestChunking(t *testing.T) {
	for _, tc := range []struct {
		size  int64
		count int
		last  int64
	}{{0, 0, 0}, {1, 1, 1}, {ChunkSize, 1, ChunkSize}, {ChunkSize + 1, 2, 1}, {3*ChunkSize + 5, 4, 5}} {
		if got := ChunkCount(tc.size); got != tc.count {
			t.Errorf("ChunkCount(%d) = %d, want %d", tc.size, got, tc.count)
		}
		if tc.count > 0 {
			off, n := ChunkBounds(tc.size, tc.count-1)
			if n != tc.last || off != int64(tc.count-1)*ChunkSize {
				t.Errorf("last chunk of %d: %d+%d", tc.size, off, n)
			}
		}
	}
}

// sample is a small valid manifest: one file of a frame, a tensor and padding.
func sample() *Manifest {
	data := []byte("tensor bytes")
	frame := []byte("header")
	return &Manifest{Schema: ManifestSchema, Format: "safetensors",
		Files: []File{{Path: "model.safetensors", Size: int64(len(frame) + len(data) + 2), Digest: Sum([]byte("whatever")), Role: RoleContainer,
			Meta: map[string]string{"b": "2", "a": "1"},
			Extents: []Extent{
				{Kind: ExtentFrame, Size: int64(len(frame)), Data: &Data{Digest: Sum(frame), Chunks: []Digest{Sum(frame)}}},
				{Kind: ExtentTensor, Size: int64(len(data)), Tensor: 0},
				{Kind: ExtentZeros, Size: 2},
			}}},
		Tensors: []Tensor{{Name: "w", DType: "U8", Shape: []int64{12}, Size: 12, Digest: Sum(data), Chunks: []Digest{Sum(data)}}},
	}
}

func TestManifestEncodingIsCanonical(t *testing.T) {
	d1, b1, err := sample().Digest()
	if err != nil {
		t.Fatal(err)
	}
	d2, b2, _ := sample().Digest()
	if d1 != d2 || !bytes.Equal(b1, b2) {
		t.Fatal("the same manifest encoded twice differs")
	}
	if !bytes.Contains(b1, []byte(`"meta":{"a":"1","b":"2"}`)) || bytes.HasSuffix(b1, []byte("\n")) {
		t.Fatalf("not canonical: %s", b1)
	}
	m, err := DecodeManifest(b1)
	if err != nil {
		t.Fatal(err)
	}
	if d3, _, _ := m.Digest(); d3 != d1 {
		t.Fatal("decode → encode changed the digest")
	}
	if got := m.Blobs(); len(got) != 2 {
		t.Fatalf("Blobs = %v", got)
	}
}

func TestManifestValidation(t *testing.T) {
	for name, mutate := range map[string]func(m *Manifest){
		"unclean path":  func(m *Manifest) { m.Files[0].Path = "../x" },
		"absolute path": func(m *Manifest) { m.Files[0].Path = "/x" },
		"extents short": func(m *Manifest) { m.Files[0].Size++ },
		"tensor index":  func(m *Manifest) { m.Files[0].Extents[1].Tensor = 3 },
		"tensor size":   func(m *Manifest) { m.Tensors[0].Size = 11 },
		"frame chunks":  func(m *Manifest) { m.Files[0].Extents[0].Data.Chunks = nil },
		"unknown kind":  func(m *Manifest) { m.Files[0].Extents[2].Kind = "holes" },
		"files out of order": func(m *Manifest) {
			m.Files = append(m.Files, m.Files[0])
		},
		"path not UTF-8":             func(m *Manifest) { m.Files[0].Path = "model\xff.safetensors" },
		"tensor name not UTF-8":      func(m *Manifest) { m.Tensors[0].Name = "w\xc3" },
		"meta key not UTF-8":         func(m *Manifest) { m.Files[0].Meta["\xfe"] = "x" },
		"meta value not UTF-8":       func(m *Manifest) { m.Files[0].Meta["a"] = "\xed\xa0\x80" },
		"model meta key not UTF-8":   func(m *Manifest) { m.Meta = map[string]string{"\xfe": "x"} },
		"model meta value not UTF-8": func(m *Manifest) { m.Meta = map[string]string{"a": "\xff"} },
		"dtype not UTF-8":            func(m *Manifest) { m.Tensors[0].DType = "F\x80" },
		"format not UTF-8":           func(m *Manifest) { m.Format = "\xff" },
	} {
		m := sample()
		mutate(m)
		if _, _, err := m.Digest(); !errors.Is(err, errs.SchemaError) {
			t.Errorf("%s: err = %v, want schema_error", name, err)
		}
	}
	_, b, _ := sample().Digest()
	if _, err := DecodeManifest(bytes.Replace(b, []byte(`"schema":1`), []byte(`"schema":2`), 1)); !errors.Is(err, errs.UnsupportedVersion) {
		t.Errorf("schema 2: %v", err)
	}
	if _, err := DecodeManifest(bytes.Replace(b, []byte(`{"schema"`), []byte(`{"extra":1,"schema"`), 1)); !errors.Is(err, errs.IntegrityError) {
		t.Errorf("unknown field: %v", err)
	}
}

// TestCheckReadBack: what Encode writes reads back; bytes that would not (a
// schema this build does not read, broken JSON, content that fails
// validation) are refused with their class.
func TestCheckReadBack(t *testing.T) {
	_, b, err := sample().Digest()
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckReadBack(b); err != nil {
		t.Fatalf("a fresh encoding does not read back: %v", err)
	}
	for name, c := range map[string]struct {
		b     []byte
		class errs.Class
	}{
		"schema 2":      {bytes.Replace(b, []byte(`"schema":1`), []byte(`"schema":2`), 1), errs.UnsupportedVersion},
		"truncated":     {b[:len(b)-1], errs.IntegrityError},
		"bad path":      {bytes.Replace(b, []byte(`"model.safetensors"`), []byte(`"../model"`), 1), errs.SchemaError},
		"unknown field": {bytes.Replace(b, []byte(`{"schema":1,`), []byte(`{"schema":1,"x":0,`), 1), errs.IntegrityError},
		"bad digest":    {bytes.Replace(b, []byte(`"digest":"`), []byte(`"digest":"X`), 1), errs.IntegrityError},
	} {
		if err := CheckReadBack(c.b); errs.ClassOf(err) != c.class {
			t.Errorf("%s: %v, want class %v", name, err, c.class)
		}
	}
}

func TestCompare(t *testing.T) {
	a, b := sample(), sample()
	b.Tensors[0].Digest = Sum([]byte("other"))
	b.Tensors[0].Chunks = []Digest{Sum([]byte("other"))}
	b.Tensors = append(b.Tensors, Tensor{Name: "new", DType: "U8", Shape: []int64{1}, Size: 1, Digest: Sum([]byte("n")), Chunks: []Digest{Sum([]byte("n"))}})
	b.Files[0].Digest = Sum([]byte("changed"))
	d := Compare(a, b)
	if d.Count[Changed] != 1 || d.Count[Added] != 1 || d.Count[Removed] != 0 || d.Bytes[Changed] != 12 || d.Tensors[1].NewChunkBytes != 12 {
		t.Fatalf("diff %+v", d)
	}
	if d.Files[0].Change != Changed {
		t.Fatalf("files %+v", d.Files)
	}
	if back := Compare(b, a); back.Count[Removed] != 1 {
		t.Fatalf("reverse diff %+v", back.Count)
	}
}

package objects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// jsonEncoding is the canonical encoding as encoding/json writes it: what
// appendManifest must match byte for byte.
func jsonEncoding(t testing.TB, m *Manifest) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// codecCases are manifests that exercise every branch of the encoding:
// strings that need escapes, nil and empty lists, metadata, zero tensor
// indexes, scalar shapes.
func codecCases() map[string]*Manifest {
	d := func(s string) Digest { return Sum([]byte(s)) }
	odd := []string{"a\"b", `back\slash`, "tab\tnl\n", "ctl\x01\x1f", "<html>&", "é ü 中文", "line\u2028sep\u2029", "del\x7f", ""}
	cases := map[string]*Manifest{"sample": sample()}
	m := sample()
	m.Files[0].Meta = map[string]string{}
	for i, s := range odd {
		m.Files[0].Meta[s] = odd[(i+1)%len(odd)]
	}
	m.Meta = map[string]string{}
	for i, s := range odd {
		m.Meta[s] = odd[(i+2)%len(odd)]
	}
	m.Tensors[0].Name = "w\"\\\u2028é"
	m.Tensors[0].DType = "F8_E4M3"
	cases["escapes"] = m

	empty := &Manifest{Schema: ManifestSchema, Format: "safetensors"}
	cases["nil lists"] = empty
	cases["manifest meta"] = &Manifest{Schema: ManifestSchema, Format: "gguf", Meta: map[string]string{"hf.revision": "0123", "hf.repo": "acme/llm"}}
	cases["empty lists"] = &Manifest{Schema: ManifestSchema, Format: "gguf", Files: []File{}, Tensors: []Tensor{}}

	many := &Manifest{Schema: ManifestSchema, Format: "safetensors", Tensors: []Tensor{}}
	f := File{Path: "model.safetensors", Role: RoleContainer, Digest: d("f"), Extents: []Extent{{Kind: ExtentFrame, Size: 8, Data: &Data{Digest: d("h"), Chunks: []Digest{d("h")}}}}}
	for i := range 50 {
		many.Tensors = append(many.Tensors, Tensor{Name: fmt.Sprintf("t.%d", i), DType: "BF16", Shape: []int64{int64(i), 2}, Size: int64(4 * i),
			Digest: d(fmt.Sprint(i)), Chunks: []Digest{d(fmt.Sprint(i))}})
		f.Extents = append(f.Extents, Extent{Kind: ExtentTensor, Size: int64(4 * i), Tensor: i})
	}
	many.Tensors[0].Chunks = []Digest{} // size 0
	many.Tensors[1].Shape = []int64{}   // a scalar
	many.Tensors[2].Shape = nil
	many.Tensors[3].Shape = []int64{-1}
	f.Extents = append(f.Extents, Extent{Kind: ExtentZeros, Size: 3})
	for _, e := range f.Extents {
		f.Size += e.Size
	}
	many.Files = []File{f, {Path: "empty.txt", Role: RoleOther, Digest: Sum(nil), Extents: []Extent{}}}
	cases["many"] = many
	return cases
}

func TestManifestEncodingIsEncodingJSON(t *testing.T) {
	for name, m := range codecCases() {
		t.Run(name, func(t *testing.T) {
			want := jsonEncoding(t, m)
			if got := appendManifest(nil, m); !bytes.Equal(got, want) {
				t.Fatalf("encoding differs from encoding/json:\n got %s\nwant %s", got, want)
			}
			var streamed bytes.Buffer
			if err := m.WriteJSON(&streamed); err != nil || !bytes.Equal(streamed.Bytes(), want) {
				t.Fatalf("WriteJSON differs from encoding/json (%v):\n got %s\nwant %s", err, streamed.Bytes(), want)
			}
			back, ok := decodeCanonical(want)
			if !ok || !sameEncoding(back, want) {
				t.Fatalf("the canonical decoder does not take its own encoding (ok %v)", ok)
			}
			viaJSON, err := decodeWithJSON(want)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, viaJSON) {
				t.Fatalf("decoders disagree:\n fast %+v\n json %+v", back, viaJSON)
			}
		})
	}
}

// Another spelling of a manifest (spaces, other key order, escapes where
// none are needed) is not canonical: the fast decoder refuses it or its
// encoding does not match, and DecodeManifest takes it through
// encoding/json, with the same result.
func TestDecodeManifestOtherSpellings(t *testing.T) {
	m := sample()
	enc, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(enc, &generic); err != nil {
		t.Fatal(err)
	}
	indented, _ := json.MarshalIndent(generic, "", "  ") // sorted keys, spaces
	escaped := bytes.Replace(enc, []byte(`"safetensors"`), []byte(`"safe\u0074ensors"`), 1)
	for name, b := range map[string][]byte{"indented": indented, "escaped": escaped} {
		t.Run(name, func(t *testing.T) {
			if fast, ok := decodeCanonical(b); ok && sameEncoding(fast, b) {
				t.Fatal("a non-canonical spelling was taken as canonical")
			}
			got, err := DecodeManifest(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, mustDecode(t, enc)) {
				t.Fatalf("decoded %+v", got)
			}
		})
	}
}

func mustDecode(t *testing.T, b []byte) *Manifest {
	t.Helper()
	m, err := DecodeManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// FuzzDecodeManifest: whatever the input, a manifest taken by the fast
// path is the one encoding/json decodes from the same bytes.
func FuzzDecodeManifest(f *testing.F) {
	for _, m := range codecCases() {
		f.Add(appendManifest(nil, m))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		defer func(n int) { parallelTensors = n }(parallelTensors)
		parallelTensors = 1 // lists of any length read in halves too
		fast, cut, ok := decodeCanonicalCut(b)
		if !ok || !sameEncodingCut(fast, b, cut) {
			return
		}
		slow, err := decodeWithJSON(b)
		if err != nil {
			t.Fatalf("canonical bytes that encoding/json refuses: %v", err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("decoders disagree on %q", b)
		}
	})
}

// smallTensors is the manifest of one file of n tensors of 512 B, tensor i
// named name(i): bench/perf.sh's model of 100,000.
func smallTensors(n int, name func(int) string) *Manifest {
	m := &Manifest{Schema: ManifestSchema, Format: "safetensors"}
	f := File{Path: "model.safetensors", Role: RoleContainer}
	for i := range n {
		d := Sum(fmt.Append(nil, i))
		m.Tensors = append(m.Tensors, Tensor{Name: name(i), DType: "F32", Shape: []int64{128}, Size: 512, Digest: d, Chunks: []Digest{d}})
		f.Extents = append(f.Extents, Extent{Kind: ExtentTensor, Size: 512, Tensor: i})
		f.Size += 512
	}
	m.Files = []File{f}
	return m
}

func BenchmarkManifestCodec(b *testing.B) {
	m := smallTensors(100_000, func(i int) string { return fmt.Sprintf("model.layers.%d.block.%d.weight", i/100, i%100) })
	enc, err := m.Encode()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.Encode()
		}
		b.ReportMetric(float64(len(enc))/float64(len(m.Tensors)), "B/tensor")
	})
	b.Run("digest", func(b *testing.B) { // encoded in halves, hashed beside (Digest)
		b.ReportAllocs()
		for b.Loop() {
			m.Digest()
		}
	})
	b.Run("encode/encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			jsonEncoding(b, m)
		}
	})
	b.Run("decode/encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeWithJSON(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeManifest(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The shortest tensor encoding is what decodeCanonical's allocation bound
// assumes.
func TestMinTensorEncoding(t *testing.T) {
	if n := len(appendTensor(nil, &Tensor{})); n != minTensorEncoding {
		t.Fatalf("an empty tensor encodes in %d bytes, minTensorEncoding is %d", n, minTensorEncoding)
	}
}

// encodedLen sizes Encode's buffer: the length of the encoding exactly
// when its text is plain ASCII (so the buffer is not grown, nor held larger
// than the encoding), and never less than it.
func TestEncodedLen(t *testing.T) {
	for name, m := range codecCases() {
		t.Run(name, func(t *testing.T) {
			enc := appendManifest(nil, m)
			n := encodedLen(m)
			if name == "escapes" {
				if n < len(enc) {
					t.Fatalf("encodedLen %d, less than the encoding's %d bytes", n, len(enc))
				}
				return
			}
			if n != len(enc) {
				t.Fatalf("encodedLen %d, the encoding is %d bytes", n, len(enc))
			}
		})
	}
	for _, s := range []string{"\x01\x1f", "\xff\xfe", "\u2028\u2029", "é\"\\"} {
		if got := len(appendString(nil, s)); got > stringLen(s) {
			t.Errorf("%q encodes to %d bytes, stringLen says at most %d", s, got, stringLen(s))
		}
	}
	if enc, err := sample().Encode(); err != nil || cap(enc) != len(enc) {
		t.Fatalf("Encode: %v, a buffer of %d for %d bytes", err, cap(enc), len(enc))
	}
}

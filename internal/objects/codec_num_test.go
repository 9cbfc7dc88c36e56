package objects

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// canonReader.int takes exactly what strconv.ParseInt takes of a minus and
// digits, with the same value, whether it sums the digits itself (up to
// 18) or hands them to ParseInt.
func TestCanonIntIsParseInt(t *testing.T) {
	cases := []string{"0", "-0", "7", "-7", "007", "-", "", "x", "-x",
		"123456789012345678", "-123456789012345678", "999999999999999999",
		"1234567890123456789", "9223372036854775807", "9223372036854775808",
		"-9223372036854775808", "-9223372036854775809", "99999999999999999999",
		"00000000000000000000001", "-00000000000000000000009223372036854775808"}
	for _, in := range cases {
		d := canonReader{b: []byte(in + `,"`)}
		v, ok := d.int()
		digits := strings.TrimRight(in, "x")
		want, err := strconv.ParseInt(digits, 10, 64)
		if ok != (err == nil) || ok && (v != want || d.i != len(in)) {
			t.Errorf("int(%q) = %d, %v (at %d); ParseInt: %d, %v", in, v, ok, d.i, want, err)
		}
		if !ok && d.i != 0 {
			t.Errorf("int(%q) refused and moved to %d", in, d.i)
		}
	}
}

// decodeHex takes 64 lowercase hex digits and nothing else: each byte
// value at each position, and other lengths.
func TestDecodeHex(t *testing.T) {
	const valid = "0123456789abcdef00112233445566778899aabbccddeeffa0b1c2d3e4f5a6b7"
	var want Digest
	hex.Decode(want[:], []byte(valid))
	var d Digest
	if !decodeHex(&d, valid) || d != want {
		t.Fatalf("decodeHex(%q) = %x", valid, d)
	}
	for pos := range len(valid) {
		for c := range 256 {
			in := []byte(valid)
			in[pos] = byte(c)
			lower := c >= '0' && c <= '9' || c >= 'a' && c <= 'f'
			var got Digest
			ok := decodeHex(&got, in)
			var ref Digest
			_, err := hex.Decode(ref[:], in)
			if ok != lower || ok && (err != nil || got != ref) {
				t.Fatalf("byte %#x at %d: decodeHex %v %x, hex.Decode %v %x", c, pos, ok, got, err, ref)
			}
		}
	}
	for _, n := range []int{0, 62, 63, 65, 66} {
		if decodeHex(&d, strings.Repeat("a", n)) {
			t.Errorf("decodeHex took %d digits", n)
		}
	}
}

// The shortest extent encoding is what decodeCanonical's allocation bound
// for the extents assumes.
func TestMinExtentEncoding(t *testing.T) {
	for _, k := range []ExtentKind{ExtentTensor, ExtentFrame, ExtentZeros} {
		f := &File{Extents: []Extent{{Kind: k}}}
		none := &File{Extents: []Extent{}}
		with, _ := appendFile(nil, f, func(p []byte) ([]byte, bool) { return p, true })
		without, _ := appendFile(nil, none, func(p []byte) ([]byte, bool) { return p, true })
		if n := len(with) - len(without); n < minExtentEncoding {
			t.Errorf("an empty %s extent encodes in %d bytes, below minExtentEncoding %d", k, n, minExtentEncoding)
		}
	}
	if n := len(`{"kind":"zeros","size":0}`); n != minExtentEncoding {
		t.Errorf("minExtentEncoding is %d, the shortest extent %d", minExtentEncoding, n)
	}
}

// Digest hashes a large encoding beside writing it: the digest and bytes
// are those of Encode, for plain and escaped text, whatever the size
// around hashBeside.
func TestDigestOfLargeManifest(t *testing.T) {
	for _, n := range []int{3_000, 4_000, 12_000} {
		for _, name := range []string{"layers.%d.weight", "ü\u2028\"layers.%d"} {
			m := smallTensors(n, func(i int) string { return strings.Replace(name, "%d", strconv.Itoa(i), 1) })
			enc, err := m.Encode()
			if err != nil {
				t.Fatal(err)
			}
			d, b, err := m.Digest()
			if err != nil || string(b) != string(enc) || d != Sum(enc) {
				t.Fatalf("%d tensors named %q: Digest %s (err %v), %d bytes; Encode %d bytes, digest %s", n, name, d.Short(), err, len(b), len(enc), Sum(enc).Short())
			}
			if above := len(enc) > hashBeside; above != (n > 3_000) {
				t.Fatalf("%d tensors encode in %d bytes: the cases no longer straddle hashBeside", n, len(enc))
			}
		}
	}
}

// Digest encodes a tensor list in two halves at once (here from two
// tensors): its digest and bytes are Encode's for the codec cases, each
// again with more tensors, for escaped names in both halves and metadata,
// and a manifest Validate refuses is refused whole, with Validate's error.
func TestDigestInHalves(t *testing.T) {
	defer func(n int) { halvesFrom = n }(halvesFrom)
	halvesFrom = 2
	cases := codecCases()
	for name, m := range codecCases() { // fresh copies, each given more tensors
		if len(m.Tensors) > 0 {
			m.Tensors = append(m.Tensors, sample().Tensors...)
			m.Tensors = append(m.Tensors, m.Tensors[0])
			m.Tensors[len(m.Tensors)-1].Name += "\u00e9 last"
			cases[name+", more tensors"] = m
		}
	}
	cases["two tensors"] = smallTensors(2, func(i int) string { return "t" + strconv.Itoa(i) })
	escaped := smallTensors(7, func(i int) string { return "ü\u2028\"layers." + strconv.Itoa(i) })
	escaped.Meta = map[string]string{"note": "é", "b": "2"}
	cases["escaped names, meta"] = escaped
	var halved []string // the cases encoded in halves
	for name, m := range cases {
		enc, err := m.Encode()
		d, b, derr := m.Digest()
		if err != nil {
			if derr == nil || derr.Error() != err.Error() {
				t.Errorf("%s: Encode refuses (%v), Digest answers %v", name, err, derr)
			}
			continue
		}
		if len(m.Tensors) >= 2 {
			halved = append(halved, name)
		}
		if derr != nil || string(b) != string(enc) || d != Sum(enc) {
			t.Errorf("%s: Digest in halves %s (err %v), %d bytes; Encode %d bytes, digest %s", name, d.Short(), derr, len(b), len(enc), Sum(enc).Short())
		}
	}
	if slices.Sort(halved); len(halved) != 4 {
		t.Errorf("encoded in halves: %q; four cases were meant to be", halved)
	}
	m := smallTensors(3, func(i int) string { return []string{"a", "b\xff", "c"}[i] })
	_, verr := m.Encode()
	if _, _, err := m.Digest(); verr == nil || err == nil || err.Error() != verr.Error() {
		t.Errorf("a tensor name of invalid UTF-8: Digest in halves answers %v, Validate %v", err, verr)
	}
}

// A list of tensors read (and compared with its encoding) in two halves is
// the list read in one, for a split near the middle of lists of any
// length; a half that does not read makes the whole not canonical, and no
// damaged byte passes for the encoding.
func TestTensorsReadInHalves(t *testing.T) {
	defer func(n int) { parallelTensors = n }(parallelTensors)
	for _, n := range []int{1, 2, 3, 5, 17, 200} {
		m := &Manifest{Schema: ManifestSchema, Format: "safetensors", Files: []File{}}
		for i := range n {
			d := Sum([]byte(strconv.Itoa(i)))
			m.Tensors = append(m.Tensors, Tensor{Name: "t" + strings.Repeat("x", i%7) + strconv.Itoa(i), DType: []string{"F32", "BF16"}[i%2],
				Shape: []int64{int64(i), 2}[:1+i%2], Size: 8, Digest: d, Chunks: []Digest{d}[:i%2]})
		}
		enc := appendManifest(nil, m)
		parallelTensors = 1 << 30
		whole, ok := decodeCanonical(enc)
		if !ok {
			t.Fatalf("%d tensors: the serial read refuses the canonical encoding", n)
		}
		parallelTensors = 1
		halves, cut, ok := decodeCanonicalCut(enc)
		if !ok || !reflect.DeepEqual(halves, whole) {
			t.Fatalf("%d tensors: read in halves (ok %v) differs from the serial read", n, ok)
		}
		if n >= 17 && cut.k == 0 {
			t.Fatalf("%d tensors: the list was not cut", n)
		}
		if !sameEncodingCut(whole, enc, cut) {
			t.Fatalf("%d tensors: compared in two parts at %+v, the encoding is not the manifest's", n, cut)
		}
		// Damage each byte of the list in turn: the two reads agree.
		lo := bytes.Index(enc, []byte(`"tensors":`))
		for i := lo; i < len(enc); i += 1 + n/3 {
			bad := bytes.Clone(enc)
			bad[i] ^= 0x20
			parallelTensors = 1 << 30
			w, wok := decodeCanonical(bad)
			parallelTensors = 1
			h, hok := decodeCanonical(bad)
			if wok != hok || wok && !reflect.DeepEqual(w, h) {
				t.Fatalf("%d tensors, byte %d flipped: serial ok %v, halves ok %v", n, i, wok, hok)
			}
			wsame := sameEncoding(whole, bad)
			if hsame := sameEncodingCut(whole, bad, cut); wsame || hsame {
				t.Fatalf("%d tensors, byte %d flipped: the manifest's encoding (serial %v, in two parts %v)", n, i, wsame, hsame)
			}
		}
	}
}

// sameEncodingCut is true, whatever the cut, only for the manifest's own
// encoding: for every tensor k and every byte, it is true just where
// tensor k's comma is.
func TestSameEncodingAnyCut(t *testing.T) {
	m := smallTensors(6, func(i int) string { return "t" + strconv.Itoa(i) })
	enc := appendManifest(nil, m)
	for k := range len(m.Tensors) + 1 {
		want := -1
		if k > 0 && k < len(m.Tensors) {
			want = bytes.Index(enc, []byte(`,{"name":"t`+strconv.Itoa(k)+`"`))
		}
		for at := -1; at <= len(enc)+1; at++ {
			got := sameEncodingCut(m, enc, tensorCut{k: k, at: at})
			if inRange := k > 0 && k < len(m.Tensors) && at >= 0 && at <= len(enc); got != (at == want || !inRange) {
				t.Fatalf("cut at tensor %d, byte %d (its comma at %d): %v", k, at, want, got)
			}
			if bad := append(bytes.Clone(enc), ' '); sameEncodingCut(m, bad, tensorCut{k: k, at: at}) {
				t.Fatalf("cut at tensor %d, byte %d: a longer encoding passes", k, at)
			}
		}
	}
}

package bytegroup

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

// goldenArrays are the arrays testdata/*.mbg were coded from, by the
// coder as it was before the difference delta (commit d0a4eb2): a BF16
// fine-tune of odd length and a base 1001 bytes shorter.
func goldenArrays() (base, ft []byte) {
	r := rand.New(rand.NewPCG(11, 12))
	n := 40<<10 + 5
	base, ft = make([]byte, n), make([]byte, n)
	for i := 0; i+1 < n; i += 2 {
		w := float32(r.NormFloat64() * 0.02)
		binary.LittleEndian.PutUint16(base[i:], uint16(math.Float32bits(w)>>16))
		binary.LittleEndian.PutUint16(ft[i:], uint16(math.Float32bits(w+float32(r.NormFloat64()*1e-3))>>16))
	}
	return base[:n-1001], ft
}

// Blobs coded by an earlier build (grouped, header 1; XOR delta with the
// top-byte context, header 2) decode as they did: old stores still read.
func TestOlderCodingsStillDecode(t *testing.T) {
	base, ft := goldenArrays()
	for name, decode := range map[string]func([]byte) ([]byte, error){
		"grouped-v1.mbg": func(enc []byte) ([]byte, error) { return Decode(nil, enc, len(ft)) },
		"delta-v2.mbg":   func(enc []byte) ([]byte, error) { return DecodeDelta(nil, enc, len(ft), base) },
	} {
		enc, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decode(enc)
		if err != nil || !bytes.Equal(got, ft) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// The XOR delta is still coded the same way, byte for byte.
	if want, _ := os.ReadFile("testdata/delta-v2.mbg"); !bytes.Equal(EncodeWith(XOR(nil, ft, base), 2, base), want) {
		t.Error("the XOR delta's coding changed")
	}
}

// Deltas coded by the build before the one-pass split (commit adaa6e9)
// against a base as long as the array, where the one-pass split and join
// apply (widths 2 and 4, XOR and difference, an odd trailing byte): they
// decode as they did, and are coded again to the same bytes.
func TestOnePassDeltasMatchTheFormat(t *testing.T) {
	base, ft := goldenArrays()
	full := append(append([]byte{}, base...), ft[len(base):]...)
	full[len(full)-7] ^= 0x55
	f4 := ft[:len(ft)-1]
	for _, c := range []struct {
		file      string
		raw, base []byte
		width     int
		transform transform
	}{
		{"delta-v3.mbg", ft, full, 2, byDifference},
		{"delta-v2-full.mbg", ft, full, 2, byXOR},
		{"delta-v3-w4.mbg", f4, full[:len(f4)], 4, byDifference},
		{"delta-v2-w4.mbg", f4, full[:len(f4)], 4, byXOR},
	} {
		want, err := os.ReadFile("testdata/" + c.file)
		if err != nil {
			t.Fatal(err)
		}
		if !keyedFits(len(c.raw)/c.width, c.width, c.base, c.transform) {
			t.Fatalf("%s: the one-pass path does not apply", c.file)
		}
		if got := encode(nil, c.raw, c.width, c.base, c.transform); !bytes.Equal(got, want) {
			t.Errorf("%s: coded differently", c.file)
		}
		if got, err := DecodeDelta(nil, want, len(c.raw), c.base); err != nil || !bytes.Equal(got, c.raw) {
			t.Errorf("%s: %v", c.file, err)
		}
	}
}

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

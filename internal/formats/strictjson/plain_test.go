package strictjson

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// plainBytes is plain8, a byte at a time.
func plainBytes(b []byte) bool {
	for _, c := range b {
		if c == '"' || c == '\\' || c < 0x20 {
			return false
		}
	}
	return true
}

// TestPlain8 checks plain8 against the bytes: every byte value at every
// place among plain bytes of each kind, and random words, which are
// mostly bytes at and above 0x80 and mixes of special bytes.
func TestPlain8(t *testing.T) {
	check := func(b []byte) {
		t.Helper()
		if got, want := plain8(binary.LittleEndian.Uint64(b)), plainBytes(b); got != want {
			t.Fatalf("plain8(% x) = %v, want %v", b, got, want)
		}
	}
	for _, bg := range []byte{'a', ' ', 0x7f, 0x80, 0xff, '"' + 1, '\\' - 1} {
		for at := range 8 {
			for c := range 256 {
				b := []byte{bg, bg, bg, bg, bg, bg, bg, bg}
				b[at] = byte(c)
				check(b)
				b[7-at] = '"' // two special bytes, or one
				check(b)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	special := []byte{'"', '\\', 0, 0x1f, 0x20, 0x21, 0x5b, 0x5d, 0x7f, 0x80, 0xff}
	b := make([]byte, 8)
	for range 200_000 {
		for i := range b {
			if rng.IntN(3) == 0 {
				b[i] = special[rng.IntN(len(special))]
			} else {
				b[i] = byte(rng.IntN(256))
			}
		}
		check(b)
	}
}

package formats

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

func TestCRC32Combine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 7, 64, 1000, 4097} {
		a, b := make([]byte, r.IntN(300)), make([]byte, n)
		for i := range a {
			a[i] = byte(r.Uint32())
		}
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		want := crc32.ChecksumIEEE(append(append([]byte{}, a...), b...))
		if got := CRC32Combine(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(b), int64(n)); got != want {
			t.Errorf("combine of %d and %d bytes = %#x, want %#x", len(a), n, got, want)
		}
		s := CRC32Slot{Prefix: a, Size: int64(n)}
		if len(a) > 0 && s.Value(crc32.ChecksumIEEE(b)) != want {
			t.Errorf("slot with a %d-byte prefix: wrong CRC", len(a))
		}
	}
}

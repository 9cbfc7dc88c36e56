package formats

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"unsafe"
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
		s := CRC32Slot{PrefixCRC: crc32.ChecksumIEEE(a), Size: int64(n)}
		if s.Value(crc32.ChecksumIEEE(b)) != want {
			t.Errorf("slot with a %d-byte prefix: wrong CRC", len(a))
		}
		// What Value skips for a PrefixCRC of 0: combined with a CRC-32
		// of 0, a CRC-32 is itself.
		if crcB := crc32.ChecksumIEEE(b); CRC32Combine(0, crcB, int64(n)) != crcB {
			t.Errorf("combine of a CRC-32 of 0 with %d bytes changed their CRC-32", n)
		}
	}
}

// Long members: the powers of x up to the table's last (2^31 of them,
// for B of 2^29 bytes or more), against the CRC of A and B's zero bytes
// computed through.
func TestCRC32CombineLong(t *testing.T) {
	a := []byte("prefix of the member")
	zeros := make([]byte, 1<<20)
	for _, n := range []int64{100<<20 + 3, 1<<29 + 5} {
		want, crcB := crc32.ChecksumIEEE(a), uint32(0)
		for left := n; left > 0; left -= int64(len(zeros)) {
			part := zeros[:min(left, int64(len(zeros)))]
			want, crcB = crc32.Update(want, crc32.IEEETable, part), crc32.Update(crcB, crc32.IEEETable, part)
		}
		if got := CRC32Combine(crc32.ChecksumIEEE(a), crcB, n); got != want {
			t.Errorf("combine with %d zero bytes = %#x, want %#x", n, got, want)
		}
	}
}

// An .npz of 100,000 arrays plans 200,000 slots.
func TestCRC32SlotSize(t *testing.T) {
	if n := unsafe.Sizeof(CRC32Slot{}); n > 24 {
		t.Errorf("a CRC-32 slot is %d bytes, want at most 24", n)
	}
}

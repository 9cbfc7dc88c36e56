package pytorch

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/mstore/mstore/internal/formats/zipfile"
)

// countingReader notes which bytes of data were read.
type countingReader struct {
	data []byte
	read []bool
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := bytes.NewReader(c.data).ReadAt(p, off)
	for i := range n {
		c.read[off+int64(i)] = true
	}
	return n, err
}

// The block reader answers every read with the file's bytes, and its
// blocks stop at a large member's data: what it reads inside a hole is
// only what was asked for.
func TestBlockReaderHoles(t *testing.T) {
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	c := &countingReader{data: data, read: make([]bool, len(data))}
	b := newBlockReader(c, int64(len(data)))
	// Two large members (their data holes) and a small one, whose data
	// blocks may read through.
	members := []*zipfile.Member{
		{Name: "a/big", Header: 100_000, Size: 200_000},
		{Name: "a/small", Header: 400_000, Size: 1000},
		{Name: "a/bigger", Header: 500_000, Size: 400_000},
	}
	b.skipData(members)
	asked := make([]bool, len(data))
	rng := rand.New(rand.NewPCG(1, 2))
	read := func(off int64, n int) {
		p := make([]byte, n)
		if got, err := b.ReadAt(p, off); err != nil || got != n || !bytes.Equal(p, data[off:off+int64(n)]) {
			t.Fatalf("read of %d bytes at %d: %d, %v, or other bytes", n, off, got, err)
		}
		for i := range int64(n) {
			asked[off+i] = true
		}
	}
	// Each member's local header and name, a field after it, its
	// descriptor, as zipfile reads them.
	for _, m := range members {
		read(m.Header, zipfile.LocalHeaderSize)
		read(m.Header+zipfile.LocalHeaderSize, len(m.Name)+20)
		read(m.Header+zipfile.LocalHeaderSize+int64(len(m.Name))+20+m.Size, 16)
	}
	if len(b.holes) != 2 {
		t.Fatalf("%d holes, want the two large members'", len(b.holes))
	}
	for _, h := range b.holes {
		for off := h.start; off < h.end; off++ {
			if c.read[off] && !asked[off] {
				t.Fatalf("byte %d of the hole [%d, %d) was read unasked", off, h.start, h.end)
			}
		}
	}
	// Reads anywhere, some inside the holes or across their edges.
	for range 2000 {
		n := 1 + rng.IntN(blockSize/4)
		read(rng.Int64N(int64(len(data)-n)), n)
	}
}

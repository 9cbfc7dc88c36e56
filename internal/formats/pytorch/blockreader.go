package pytorch

import (
	"io"
	"sort"

	"github.com/mstore/mstore/internal/formats/zipfile"
)

// blockReader serves the many small reads of a checkpoint's headers and
// small members (a model of 100,000 tensors has 100,000 local headers and
// data descriptors) from blocks read whole, the last one kept. A block
// stops where a large member's data may begin (skipData): a read of a
// header does not read on into the storage after it, whose bytes an add
// would otherwise verify again, a whole chunk of them for each header.
type blockReader struct {
	r     io.ReaderAt
	size  int64
	block []byte
	at    int64  // file offset of block
	holes []hole // large members' data, by start
}

// hole is a run of the file that blocks do not read into: [start, end).
type hole struct{ start, end int64 }

// blockSize is the most a block reads: 64 KiB holds the headers of about
// 80 members of 512 B, and an add verifies again what the parse read (a
// 1 MiB block read past a header verified a tensor's first chunk).
const blockSize = 64 << 10

// holeMin is the size from which a member's data is a hole.
const holeMin = 16 << 10

func newBlockReader(r io.ReaderAt, size int64) *blockReader {
	return &blockReader{r: r, size: size, at: -1}
}

// skipData makes the data of the members of at least holeMin bytes holes.
// A member's data begins after its local header's name and extra field,
// whose length only the local header says: the hole begins where it would
// with no extra field, and a read of the field is served whole (a read is
// never cut short, only what a block reads beyond it).
func (b *blockReader) skipData(members []*zipfile.Member) {
	b.holes = b.holes[:0]
	for _, m := range members {
		if m.Size >= holeMin {
			start := m.Header + zipfile.LocalHeaderSize + int64(len(m.Name))
			b.holes = append(b.holes, hole{start: start, end: start + m.Size})
		}
	}
	sort.Slice(b.holes, func(i, j int) bool { return b.holes[i].start < b.holes[j].start })
}

// ReadAt reads small runs from the current block, reading the next one
// when needed; runs larger than a quarter block, and runs inside a hole,
// go to the file directly.
func (b *blockReader) ReadAt(p []byte, off int64) (int, error) {
	if len(p) > blockSize/4 || off < 0 || off >= b.size {
		return b.r.ReadAt(p, off)
	}
	if b.at < 0 || off < b.at || off+int64(len(p)) > b.at+int64(len(b.block)) {
		n := min(blockSize, b.size-off)
		if h, ok := b.holeAfter(off); ok {
			if off >= h.start {
				return b.r.ReadAt(p, off)
			}
			n = min(n, max(int64(len(p)), h.start-off))
		}
		if cap(b.block) < int(n) {
			b.block = make([]byte, min(blockSize, b.size))
		}
		b.block = b.block[:n]
		got, err := b.r.ReadAt(b.block, off)
		b.block, b.at = b.block[:got], off
		if got < int(n) && err == nil {
			err = io.ErrUnexpectedEOF
		}
		if got < len(p) {
			return copy(p, b.block), err
		}
	}
	return copy(p, b.block[off-b.at:]), nil
}

// holeAfter is the first hole that ends after off.
func (b *blockReader) holeAfter(off int64) (hole, bool) {
	i := sort.Search(len(b.holes), func(i int) bool { return b.holes[i].end > off })
	if i == len(b.holes) {
		return hole{}, false
	}
	return b.holes[i], true
}

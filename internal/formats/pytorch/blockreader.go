package pytorch

import "io"

// blockReader serves the many small reads of a checkpoint's headers and
// small members (a model of 100,000 tensors has 100,000 local headers and
// data descriptors) from blocks read whole, the last one kept.
type blockReader struct {
	r     io.ReaderAt
	size  int64
	block []byte
	at    int64 // file offset of block
}

const blockSize = 1 << 20

func newBlockReader(r io.ReaderAt, size int64) *blockReader {
	return &blockReader{r: r, size: size, at: -1}
}

// ReadAt reads small runs from the current block, reading the next one
// when needed; runs larger than a block go to the file directly.
func (b *blockReader) ReadAt(p []byte, off int64) (int, error) {
	if len(p) > blockSize/4 || off < 0 || off >= b.size {
		return b.r.ReadAt(p, off)
	}
	if b.at < 0 || off < b.at || off+int64(len(p)) > b.at+int64(len(b.block)) {
		n := min(blockSize, b.size-off)
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

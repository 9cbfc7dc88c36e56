package store

import (
	"errors"
	"io"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mstore/mstore/internal/objects"
)

// A repack reads each raw blob once, and the coding it writes supersedes
// it: through the page cache, the kernel filled a fresh page for each of
// its bytes and copied it out again (perf: 6% of a repack's CPU in
// _copy_to_iter, more in finding the pages), for bytes no one reads
// again. ReadUncached reads them past the page cache (O_DIRECT) instead.
// An O_DIRECT read still sees what a buffered write left in the page cache
// (the kernel writes it out first), so nothing read differs.

// ReadUncached makes the reader read blobs past the page cache where it
// can: a loose blob straight into a caller's buffer that starts on a block
// (a 4 MiB allocation does) with room for its last block, a packed one
// through a block-aligned scratch buffer. Call it before the first Read.
func (r *BlobReader) ReadUncached() { r.uncached = true }

var errLonger = errors.New("the file is longer than its record")

// readLooseDirect reads the blob file p, which must hold len(buf) bytes,
// into buf with O_DIRECT; done false: it cannot be read so (not
// ReadUncached, buf unaligned or without room, no O_DIRECT), read it
// through the page cache.
func (r *BlobReader) readLooseDirect(p string, buf []byte) (done bool, err error) {
	whole := roundUp(len(buf))
	if !r.uncached || len(buf) == 0 || cap(buf) < whole || !Aligned(buf) {
		return false, nil
	}
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_DIRECT, 0)
	if errors.Is(err, unix.EINVAL) {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return true, err
	case fi.Size() > int64(len(buf)):
		return true, errLonger
	case fi.Size() < int64(len(buf)):
		return true, io.ErrUnexpectedEOF
	}
	n, err := f.ReadAt(buf[:whole], 0) // the last block's read stops at the end
	if errors.Is(err, unix.EINVAL) {
		return false, nil
	}
	if n == len(buf) {
		return true, nil
	}
	return true, short(err)
}

// short is the error of a read that returned fewer bytes than the blob
// has: io.ErrUnexpectedEOF where the read itself saw no error.
func short(err error) error {
	if err == nil || err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readPackedDirect reads len(buf) bytes at off of pack id into buf, with
// O_DIRECT through an aligned scratch buffer (done as readLooseDirect).
// A blob under directMin is read through the page cache.
func (r *BlobReader) readPackedDirect(id PackID, off int64, buf []byte) (done bool, err error) {
	lo := off &^ (directAlign - 1)
	span := roundUp(int(off-lo) + len(buf))
	if !r.uncached || len(buf) < directMin || span > scratchSize {
		return false, nil
	}
	f, err := r.directPack(id)
	if f == nil || err != nil {
		return err != nil, err
	}
	sp := ChunkScratch.Get().(*[]byte)
	defer ChunkScratch.Put(sp)
	n, err := f.ReadAt((*sp)[:span], lo)
	if errors.Is(err, unix.EINVAL) {
		return false, nil
	}
	if n < int(off-lo)+len(buf) {
		return true, short(err)
	}
	copy(buf, (*sp)[off-lo:])
	return true, nil
}

// directMin is the size under which a packed blob is read through the
// page cache even by a ReadUncached reader. Each O_DIRECT read waits for
// the device, about 60 µs here, while buffered reads of a pack's
// neighbouring blobs are served by the kernel's read-ahead: a repack of
// 100,000 blobs of 512 B spent 6.6 of its 17 s in O_DIRECT preads.
const directMin = 64 << 10

// directPack opens pack id with O_DIRECT once; nil and no error where the
// file system refuses it (remembered, so that it is asked once a pack).
func (r *BlobReader) directPack(id PackID) (*os.File, error) {
	return r.cachedPack(r.direct, id, os.O_RDONLY|unix.O_DIRECT)
}

// DirectAlign is the alignment O_DIRECT asks of a buffer, offset and
// length (directAlign).
const DirectAlign = directAlign

// AlignedBuffer returns n bytes that start on a DirectAlign boundary.
func AlignedBuffer(n int) []byte {
	b := make([]byte, n+DirectAlign)
	skip := (DirectAlign - int(uintptr(unsafe.Pointer(&b[0]))%DirectAlign)) % DirectAlign
	return b[skip : skip+n : skip+n]
}

// Aligned reports whether b's first byte lies on a DirectAlign boundary.
func Aligned(b []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%DirectAlign == 0
}

func roundUp(n int) int { return (n + directAlign - 1) &^ (directAlign - 1) }

// scratchSize holds a chunk at any offset in its first block.
const scratchSize = objects.ChunkSize + 2*directAlign

// ChunkScratch lends buffers of scratchSize bytes that start on a block:
// the uncached reads' and a checkout's decoding of coded blobs
// (restorer.directBuffer places a blob in one on its output's blocks).
var ChunkScratch = sync.Pool{New: func() any { b := AlignedBuffer(scratchSize); return &b }}

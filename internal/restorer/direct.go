package restorer

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/mstore/mstore/internal/store"
)

// A coded blob is decoded into memory and written at its offset
// (runDecoded). Through the page cache, the kernel copied each of its bytes
// into a fresh page (copy_folio_from_iter_atomic: 10% of a delta
// checkout's CPU), and in this VM that copy has a slow mode that doubled
// the system time of some checkouts. So the whole 4 KiB blocks of a decoded
// blob are written past the page cache (O_DIRECT), straight from the
// buffer it was decoded into, and only its partial first and last blocks
// through it. Durability is unchanged: publish's syncfs flushes the
// device. The bytes written are the ones verified in memory.

const directAlign = store.DirectAlign

// directFile is an output file with, where its file system allows it, a
// second descriptor of it open with O_DIRECT.
type directFile struct {
	out    *os.File
	direct *os.File // nil: every write goes through out
	// refused is set when a direct write got EINVAL after all: the jobs
	// writing the file at once then all go buffered (direct stays open
	// until Close, as another job may be in a write on it).
	refused atomic.Bool
	// writing serializes the buffered writes of coded blobs and the
	// copies of stored ones (copyFrom): to one file they take its inode
	// lock in the kernel in turn anyway; waiting here parks the goroutine
	// rather than the thread in the kernel.
	writing sync.Mutex
}

// openDirect opens out again with O_DIRECT, through /proc/self/fd so that
// it is the same file whatever its path has become. Where that fails (no
// /proc, a file system without O_DIRECT) the file is written buffered.
func openDirect(out *os.File) *directFile {
	d := &directFile{out: out}
	f, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", out.Fd()), os.O_WRONLY|unix.O_DIRECT, 0)
	if err == nil {
		d.direct = f
	}
	return d
}

func (d *directFile) Close() error {
	if d.direct == nil {
		return nil
	}
	return d.direct.Close()
}

// writeAt writes data at off: its whole aligned blocks with O_DIRECT when
// their bytes lie on aligned addresses (a buffer from directBuffer), the
// rest buffered.
func (d *directFile) writeAt(data []byte, off int64) error {
	lo := (off + directAlign - 1) &^ (directAlign - 1)
	hi := (off + int64(len(data))) &^ (directAlign - 1)
	if d.direct == nil || d.refused.Load() || hi-lo < directMin || !store.Aligned(data[lo-off:]) {
		return d.buffered(data, off)
	}
	if err := d.buffered(data[:lo-off], off); err != nil {
		return err
	}
	_, err := d.direct.WriteAt(data[lo-off:hi-off], lo)
	if errors.Is(err, unix.EINVAL) { // refused after all: this file's writes go buffered
		d.refused.Store(true)
		err = d.buffered(data[lo-off:hi-off], lo)
	}
	if err != nil {
		return err
	}
	return d.buffered(data[hi-off:], hi)
}

// directMin is the run under which a decoded blob is written buffered: a
// direct write waits for the device.
const directMin = 64 << 10

func (d *directFile) buffered(data []byte, off int64) error {
	if len(data) == 0 {
		return nil
	}
	d.writing.Lock()
	defer d.writing.Unlock()
	_, err := d.out.WriteAt(data, off)
	return err
}

// copyFrom copies n bytes of src at soff to off, in the kernel when it
// can (copyRange), one copy into the file at a time: copies of a file's
// blobs that ran at once had their threads spin on its inode lock in the
// kernel, where waiting here parks the goroutine and leaves the thread to
// verify what another job copied.
func (d *directFile) copyFrom(src *os.File, soff, off, n int64) error {
	d.writing.Lock()
	defer d.writing.Unlock()
	return copyRange(src, soff, d.out, off, n)
}

// directBuffer returns an empty slice of buf whose byte i lies on an
// aligned address where off+i is a multiple of directAlign: a blob decoded
// into it (up to a chunk) has its output file's blocks on aligned bytes.
func directBuffer(buf []byte, off int64) []byte {
	phase := int(off % directAlign)
	return buf[phase:phase]
}

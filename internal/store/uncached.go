package store

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A pull writes large raw blobs past the page cache (O_DIRECT). Buffered,
// each byte was copied into a page-cache page the kernel had to find and
// first touch, which in a VM cost more than anything else a pull did
// (perf: 40-60% of the client's CPU in copy_folio_from_iter_atomic, for a
// pull of 988 MB from serve); direct, the disk reads the pull's own
// buffer. Durability is unchanged: Commit's syncfs flushes the device and
// the metadata as before.

// directAlign is the alignment O_DIRECT asks of a write's buffer, offset
// and length: a page covers the logical block size of any usual device.
const directAlign = 4096

// WriteUncached makes Put write each raw blob whose bytes start on a
// directAlign boundary past the page cache: for bytes the caller will not
// read back soon, in a buffer it reuses. Call it before the first Put.
func (w *BlobWriter) WriteUncached() { w.uncached = true }

// writeLoose writes a raw blob's temp file, as WriteUncached says.
func (w *BlobWriter) writeLoose(name string, data []byte) (string, error) {
	if !w.uncached {
		return w.s.writeTemp(name, data)
	}
	return w.s.writeTempUncached(name, data)
}

// writeTempUncached is writeTemp with the whole blocks of data written
// with O_DIRECT and the last partial one through the page cache. Where
// that cannot be (another FS, an unaligned buffer, a file system without
// O_DIRECT, a device with larger blocks) it is writeTemp.
func (s *Store) writeTempUncached(name string, data []byte) (string, error) {
	head := len(data) &^ (directAlign - 1)
	if _, ok := s.fs.(OSFS); !ok || head == 0 || uintptr(unsafe.Pointer(&data[0]))%directAlign != 0 {
		return s.writeTemp(name, data)
	}
	p := s.tempPath(name)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_DIRECT, 0o444)
	if errors.Is(err, unix.EINVAL) {
		return s.writeTemp(name, data)
	}
	if err != nil {
		return "", fmt.Errorf("store: %w", err)
	}
	_, err = f.Write(data[:head])
	if errors.Is(err, unix.EINVAL) {
		f.Close()
		s.fs.Remove(p)
		return s.writeTemp(name, data)
	}
	if err == nil && head < len(data) {
		if err = clearDirect(f); err == nil {
			_, err = f.Write(data[head:])
		}
	}
	return s.finishTemp(p, f, err)
}

// clearDirect turns O_DIRECT off for f's next writes.
func clearDirect(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	cerr := rc.Control(func(fd uintptr) {
		var fl int
		if fl, err = unix.FcntlInt(fd, unix.F_GETFL, 0); err == nil {
			_, err = unix.FcntlInt(fd, unix.F_SETFL, fl&^unix.O_DIRECT)
		}
	})
	return errors.Join(cerr, err)
}

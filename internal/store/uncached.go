package store

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A pull and an add write large raw blobs past the page cache (O_DIRECT). Buffered,
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
// directAlign boundary past the page cache, and the writer's packs too:
// for bytes the caller will not read back soon (an add, a pull, a repack). Call it
// before the first Put.
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

// createPack creates p's temp file and buffer. With WriteUncached, where
// the store is the OS's file system and it has O_DIRECT, the pack is
// written past the page cache: every blob goes through buf, which is
// written only when it is full (packBuffer, whole blocks, from a buffer
// that starts on a block), and its last partial block at close, after
// O_DIRECT is turned off. A repack's coded output was a third of its CPU
// time in the kernel's copy into fresh page-cache pages.
func (w *BlobWriter) createPack(p *openPack) error {
	p.buf = make([]byte, 0, packBuffer)
	_, osfs := w.s.fs.(OSFS)
	if w.uncached && osfs && uintptr(unsafe.Pointer(unsafe.SliceData(p.buf)))%directAlign == 0 {
		f, err := os.OpenFile(p.tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_DIRECT, 0o444)
		if err == nil {
			p.f, p.direct = f, true
			return nil
		}
		if !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("store: %w", err)
		}
	}
	f, err := w.s.fs.Create(p.tmp)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	p.f = f
	return nil
}

// appendDirect copies data into a direct pack's buffer, writing it each
// time it is full.
func (p *openPack) appendDirect(data []byte) error {
	for len(data) > 0 {
		n := copy(p.buf[len(p.buf):cap(p.buf)], data)
		p.buf, data = p.buf[:len(p.buf)+n], data[n:]
		if len(p.buf) < cap(p.buf) {
			break
		}
		if err := p.writeDirect(p.buf); err != nil {
			return err
		}
		p.buf = p.buf[:0]
	}
	return nil
}

// writeDirect writes b, whole blocks, past the page cache. A file system
// that refuses (EINVAL) has O_DIRECT turned off and gets b, and the rest
// of the pack, through the page cache.
func (p *openPack) writeDirect(b []byte) error {
	_, err := p.f.Write(b)
	if errors.Is(err, unix.EINVAL) {
		if err = p.buffered(); err == nil {
			return p.write(b)
		}
	}
	if err != nil {
		return fmt.Errorf("store: write pack: %w", err)
	}
	Failpoint(FailBlobTempWritten)
	return nil
}

// flushDirect writes what a direct pack's buffer holds at its close: the
// whole blocks past the page cache, then the rest through it.
func (p *openPack) flushDirect() error {
	head := len(p.buf) &^ (directAlign - 1)
	if head > 0 {
		if err := p.writeDirect(p.buf[:head]); err != nil {
			return err
		}
	}
	tail := p.buf[head:]
	if p.direct {
		if err := p.buffered(); err != nil {
			return fmt.Errorf("store: write pack: %w", err)
		}
	}
	p.buf = p.buf[:0]
	if len(tail) == 0 {
		return nil
	}
	return p.write(tail)
}

// buffered turns O_DIRECT off for the rest of p's writes.
func (p *openPack) buffered() error {
	f, ok := p.f.(*os.File)
	if !ok {
		return errors.New("store: a direct pack that is not an *os.File")
	}
	p.direct = false
	return clearDirect(f)
}

//go:build linux

package store

import (
	"errors"
	"os"
	"runtime/debug"

	"golang.org/x/sys/unix"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// mapMin is the size from which a loose blob is mapped rather than read:
// below it the copy costs less than the mapping.
const mapMin = 256 << 10

// ReadMapped calls use with the raw bytes of rec, checked against its
// digest as Read checks them. A raw loose blob of mapMin bytes or more is
// mapped from its file instead of copied into memory (repack reads every
// blob of a store once: the copy was a tenth of its CPU); anything else is
// read into buf. The bytes are valid only while use runs. Blob files are
// never written in place (they are written whole and renamed), so the
// mapped bytes stay the ones checked; a file cut short meanwhile faults,
// which is reported as an integrity_error, not a crash.
func (r *BlobReader) ReadMapped(rec BlobRecord, buf []byte, use func([]byte) error) error {
	if rec.Coded() || rec.Encoding != EncodingRaw || rec.Size < mapMin || rec.Size > objects.ChunkSize {
		b, err := r.Read(rec, buf)
		if err != nil {
			return err
		}
		return use(b)
	}
	f, err := os.Open(r.s.BlobPath(rec.Digest))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return errs.New(errs.IntegrityError, "store", "blob %s is missing from the store (run `mstore fsck`)", rec.Digest.Short())
		}
		return errs.Wrap(errs.IntegrityError, "store", err, "blob %s: unreadable", rec.Digest.Short())
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return errs.Wrap(errs.IntegrityError, "store", err, "blob %s: unreadable", rec.Digest.Short())
	}
	if st.Size() != rec.Size {
		return errs.New(errs.IntegrityError, "store", "blob %s: its file holds %d bytes, want %d (run `mstore fsck`)", rec.Digest.Short(), st.Size(), rec.Size)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(rec.Size), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		b, err := r.Read(rec, buf) // a file system that does not map
		if err != nil {
			return err
		}
		return use(b)
	}
	defer unix.Munmap(m)
	return usingMapped(rec, m, use)
}

// usingMapped verifies m and runs use on it, a fault on the mapping (the
// file cut short) turned into an integrity_error.
func usingMapped(rec BlobRecord, m []byte, use func([]byte) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(interface{ Addr() uintptr }); !ok {
				panic(p) // not a fault: not ours to hide
			}
			err = errs.New(errs.IntegrityError, "store", "blob %s: its file changed while it was read (run `mstore fsck`)", rec.Digest.Short())
		}
	}()
	if err := objects.Verify(m, rec.Digest, "blob "+rec.Digest.Short()); err != nil {
		return err
	}
	return use(m)
}

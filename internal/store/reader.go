package store

import (
	"errors"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// BlobReader reads blobs, keeping pack files open between reads. It is safe
// for concurrent use.
type BlobReader struct {
	s     *Store
	mu    sync.Mutex
	packs map[PackID]*os.File
	// uncached: see ReadUncached (uncachedread.go); direct holds the
	// packs opened with O_DIRECT.
	uncached bool
	direct   map[PackID]*os.File
}

// NewBlobReader returns a reader; Close it when done.
func (s *Store) NewBlobReader() *BlobReader {
	return &BlobReader{s: s, packs: map[PackID]*os.File{}, direct: map[PackID]*os.File{}}
}

// Read reads the blob rec names into buf (grown as needed), decoding it
// (with its base, for a delta) when it is coded, and checks its raw digest:
// a mismatch, a short read, bytes that do not decode or a missing file is an
// integrity_error. Every reader of blobs comes through here.
func (r *BlobReader) Read(rec BlobRecord, buf []byte) ([]byte, error) {
	return r.read(rec, buf, true)
}

// read is Read; verify false skips the digest check, for a delta's base:
// the delta's own check covers it (a wrong base gives wrong bytes), and
// hashing it again would double the hashing of a delta checkout.
func (r *BlobReader) read(rec BlobRecord, buf []byte, verify bool) ([]byte, error) {
	if !rec.Coded() {
		return r.readStored(rec, buf, verify)
	}
	if rec.Size > objects.ChunkSize {
		return nil, errs.New(errs.IntegrityError, "store", "blob %s: recorded as %d bytes, more than a chunk", rec.Digest.Short(), rec.Size)
	}
	sp := storedBufs.Get().(*[]byte)
	defer storedBufs.Put(sp)
	stored, err := r.readStored(rec, *sp, false)
	if err != nil {
		return nil, err
	}
	*sp = stored
	var base []byte
	if rec.Coding == CodingDelta {
		brec, err := baseOf(rec)
		if err != nil {
			return nil, err
		}
		bp := baseBufs.Get().(*[]byte)
		defer baseBufs.Put(bp)
		if base, err = r.read(brec, *bp, false); err != nil {
			return nil, errs.Wrap(errs.IntegrityError, "store", err, "blob %s: its delta base", rec.Digest.Short())
		}
		*bp = base
	}
	out, err := decodeBlob(rec, stored, base, buf)
	if err != nil {
		return nil, err
	}
	if !verify {
		return out, nil
	}
	if err := objects.Verify(out, rec.Digest, "blob "+rec.Digest.Short()); err != nil {
		return nil, err
	}
	return out, nil
}

var (
	storedBufs = sync.Pool{New: func() any { return new([]byte) }}
	baseBufs   = sync.Pool{New: func() any { return new([]byte) }}
)

// ReadStored returns rec's bytes as kept on disk (coded, for a coded blob),
// after checking that they decode to the blob: gc moves them as they are.
func (r *BlobReader) ReadStored(rec BlobRecord, buf []byte) ([]byte, error) {
	if !rec.Coded() {
		return r.Read(rec, buf)
	}
	if _, err := r.Read(rec, nil); err != nil {
		return nil, err
	}
	return r.readStored(rec, buf, false)
}

// readStored reads rec's stored bytes into buf; verify checks them against
// the digest (for a raw blob).
func (r *BlobReader) readStored(rec BlobRecord, buf []byte, verify bool) ([]byte, error) {
	size := rec.StoredSize()
	if int64(cap(buf)) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	missing := func(err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return errs.New(errs.IntegrityError, "store", "blob %s is missing from the store (run `mstore fsck`)", rec.Digest.Short())
		}
		return errs.Wrap(errs.IntegrityError, "store", err, "blob %s: unreadable", rec.Digest.Short())
	}
	switch rec.Encoding {
	case EncodingRaw:
		if done, err := r.readLooseDirect(r.s.BlobPath(rec.Digest), buf); done {
			if err != nil {
				return nil, missing(err)
			}
			break
		}
		f, err := os.Open(r.s.BlobPath(rec.Digest))
		if err != nil {
			return nil, missing(err)
		}
		defer f.Close()
		if _, err := io.ReadFull(f, buf); err != nil {
			return nil, missing(err)
		}
		if n, _ := f.Read(make([]byte, 1)); n != 0 {
			return nil, missing(errLonger)
		}
	case EncodingPacked:
		if done, err := r.readPackedDirect(rec.Pack, rec.Offset, buf); done {
			if err != nil {
				return nil, missing(err)
			}
			break
		}
		f, err := r.pack(rec.Pack)
		if err != nil {
			return nil, missing(err)
		}
		if _, err := f.ReadAt(buf, rec.Offset); err != nil {
			return nil, missing(err)
		}
	default:
		return nil, errs.New(errs.IntegrityError, "store", "blob %s: unknown encoding %d", rec.Digest.Short(), rec.Encoding)
	}
	if !verify {
		return buf, nil
	}
	if err := objects.Verify(buf, rec.Digest, "blob "+rec.Digest.Short()); err != nil {
		return nil, err
	}
	return buf, nil
}

func (r *BlobReader) pack(id PackID) (*os.File, error) {
	return r.cachedPack(r.packs, id, os.O_RDONLY)
}

// cachedPack opens pack id with flag once, keeping it in cache (r.packs
// or r.direct) until Close. An O_DIRECT open the file system refuses
// (EINVAL) is kept as nil, and no error.
func (r *BlobReader) cachedPack(cache map[PackID]*os.File, id PackID, flag int) (*os.File, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := cache[id]; ok {
		return f, nil
	}
	f, err := os.OpenFile(r.s.PackPath(id), flag, 0)
	if flag&unix.O_DIRECT != 0 && errors.Is(err, unix.EINVAL) {
		f, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	cache[id] = f
	return f, nil
}

// Close closes the pack files the reader opened.
func (r *BlobReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, cache := range []map[PackID]*os.File{r.packs, r.direct} {
		for id, f := range cache {
			if f != nil {
				f.Close()
			}
			delete(cache, id)
		}
	}
	return nil
}

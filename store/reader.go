package store

import (
	"errors"
	"io"
	"os"
	"sync"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/objects"
)

// BlobReader reads blobs, keeping pack files open between reads. It is safe
// for concurrent use.
type BlobReader struct {
	s     *Store
	mu    sync.Mutex
	packs map[PackID]*os.File
}

// NewBlobReader returns a reader; Close it when done.
func (s *Store) NewBlobReader() *BlobReader {
	return &BlobReader{s: s, packs: map[PackID]*os.File{}}
}

// Read reads the blob rec names into buf (grown as needed) and checks its
// digest: a mismatch, a short read or a missing file is an integrity_error.
func (r *BlobReader) Read(rec BlobRecord, buf []byte) ([]byte, error) {
	if int64(cap(buf)) < rec.Size {
		buf = make([]byte, rec.Size)
	}
	buf = buf[:rec.Size]
	missing := func(err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return errs.New(errs.IntegrityError, "store", "blob %s is missing from the store (run `mstore fsck`)", rec.Digest.Short())
		}
		return errs.Wrap(errs.IntegrityError, "store", err, "blob %s: unreadable", rec.Digest.Short())
	}
	switch rec.Encoding {
	case EncodingRaw:
		f, err := os.Open(r.s.BlobPath(rec.Digest))
		if err != nil {
			return nil, missing(err)
		}
		defer f.Close()
		if _, err := io.ReadFull(f, buf); err != nil {
			return nil, missing(err)
		}
		if n, _ := f.Read(make([]byte, 1)); n != 0 {
			return nil, errs.New(errs.IntegrityError, "store", "blob %s is longer than %d bytes", rec.Digest.Short(), rec.Size)
		}
	case EncodingPacked:
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
	if err := objects.Verify(buf, rec.Digest, "blob "+rec.Digest.Short()); err != nil {
		return nil, err
	}
	return buf, nil
}

func (r *BlobReader) pack(id PackID) (*os.File, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.packs[id]; ok {
		return f, nil
	}
	f, err := os.Open(r.s.PackPath(id))
	if err != nil {
		return nil, err
	}
	r.packs[id] = f
	return f, nil
}

// Close closes the pack files the reader opened.
func (r *BlobReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, f := range r.packs {
		f.Close()
		delete(r.packs, id)
	}
	return nil
}

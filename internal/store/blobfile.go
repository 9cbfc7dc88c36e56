package store

import (
	"bytes"
	"errors"
	"os"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// BlobFile is where a blob's bytes are on disk: Size bytes of File at
// Offset. Nothing about them has been checked: a reader that uses it
// (checkout copying with copy_file_range) must verify the bytes it gets
// against the digest itself.
type BlobFile struct {
	File   *os.File
	Offset int64
	// Close releases File; it is a no-op for pack files, which the
	// BlobReader keeps open until it is closed.
	Close func() error
}

// Locate opens the file that holds the blob rec names. A raw blob's file
// must be exactly rec.Size bytes; a pack must hold the whole run.
func (r *BlobReader) Locate(rec BlobRecord) (BlobFile, error) {
	missing := func(err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return errs.New(errs.IntegrityError, "store", "blob %s is missing from the store (run `mstore fsck`)", rec.Digest.Short())
		}
		return errs.Wrap(errs.IntegrityError, "store", err, "blob %s: unreadable", rec.Digest.Short())
	}
	var f *os.File
	var err error
	out := BlobFile{Close: func() error { return nil }}
	switch rec.Encoding {
	case EncodingRaw:
		if f, err = os.Open(r.s.BlobPath(rec.Digest)); err != nil {
			return out, missing(err)
		}
		out.Close = f.Close
	case EncodingPacked:
		if f, err = r.pack(rec.Pack); err != nil {
			return out, missing(err)
		}
		out.Offset = rec.Offset
	default:
		return out, errs.New(errs.IntegrityError, "store", "blob %s: unknown encoding %d", rec.Digest.Short(), rec.Encoding)
	}
	info, err := f.Stat()
	if err != nil {
		out.Close()
		return out, missing(err)
	}
	switch {
	case rec.Encoding == EncodingRaw && info.Size() != rec.Size:
		out.Close()
		return out, errs.New(errs.IntegrityError, "store", "blob %s is %d bytes, recorded as %d (run `mstore fsck`)", rec.Digest.Short(), info.Size(), rec.Size)
	case info.Size() < rec.Offset+rec.Size:
		out.Close()
		return out, errs.New(errs.IntegrityError, "store", "blob %s: its pack is cut short (run `mstore fsck`)", rec.Digest.Short())
	}
	out.File = f
	return out, nil
}

// LookupRecords is Records for many blobs: it walks the index in key
// order with one cursor, stepping when the next blob needed is close and
// seeking when it is not, rather than searching the tree from its root
// for each one. A blob the index does not know is an integrity_error.
func LookupRecords(tx *bolt.Tx, ds []objects.Digest) (map[objects.Digest]BlobRecord, error) {
	out := make(map[objects.Digest]BlobRecord, len(ds))
	err := walkRecords(tx, ds, func(d objects.Digest, v []byte) error {
		r, err := decodeBlobRecord(d, v)
		if err == nil {
			err = attachBase(tx, &r) // a delta's read needs its base's record
		}
		out[d] = r
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RequireRecorded returns an integrity_error unless every blob of ds is
// recorded (what an add checks before it commits a version).
func RequireRecorded(tx *bolt.Tx, ds []objects.Digest) error {
	return walkRecords(tx, ds, func(objects.Digest, []byte) error { return nil })
}

// walkRecords calls fn with the record of each blob of ds, in key order.
func walkRecords(tx *bolt.Tx, ds []objects.Digest, fn func(objects.Digest, []byte) error) error {
	sorted := ds
	if !slices.IsSortedFunc(ds, objects.CompareDigests) {
		sorted = slices.Clone(ds)
		slices.SortFunc(sorted, objects.CompareDigests)
	}
	c := recordCursor{c: tx.Bucket(bucketBlobs).Cursor()}
	for i, d := range sorted {
		if i > 0 && d == sorted[i-1] {
			continue
		}
		v, err := c.find(d)
		if err != nil {
			return err
		}
		if err := fn(d, v); err != nil {
			return err
		}
	}
	return nil
}

// recordCursor finds blob records in ascending key order with one
// cursor: a few steps forward to a near key, a seek to a far one.
type recordCursor struct {
	c    *bolt.Cursor
	k, v []byte
	used bool
}

// find returns d's record; one not recorded is an integrity_error (a
// manifest needs it).
func (r *recordCursor) find(d objects.Digest) ([]byte, error) {
	v, ok := r.at(d)
	if !ok {
		return nil, errs.New(errs.IntegrityError, "store", "blob %s is not in the index (run `mstore fsck`)", d.Short())
	}
	return v, nil
}

// at moves the cursor to d, or to where d would be, and returns d's
// record if it has one. The digests it is given must ascend.
func (r *recordCursor) at(d objects.Digest) ([]byte, bool) {
	if !r.used {
		r.k, r.v = r.c.Seek(d[:])
		r.used = true
	}
	for step := 0; r.k != nil && bytes.Compare(r.k, d[:]) < 0; step++ {
		if step == 4 {
			r.k, r.v = r.c.Seek(d[:])
			break
		}
		r.k, r.v = r.c.Next()
	}
	if r.k == nil || !bytes.Equal(r.k, d[:]) {
		return nil, false
	}
	return r.v, true
}

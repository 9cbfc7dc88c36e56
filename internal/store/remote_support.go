package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/journal"
	"github.com/mstore/mstore/internal/objects"
)

// What remotes (internal/remote) need of a store: which blobs it lacks, and
// the named remotes of `mstore remote add`, kept in the index as git keeps
// them in its config, and journaled (OpRemote, OpRemoteRm) so that a
// rebuilt index keeps them.

var bucketRemotes = []byte("remotes")

// MissingBlobs returns those of ds that the index does not record, in order.
// They are looked up in key order, with one cursor (recordCursor), not a
// search from the root each: a push of 100,000 small tensors looked up
// each blob so twice, 0.2 s.
func MissingBlobs(tx *bolt.Tx, ds []objects.Digest) []objects.Digest {
	sorted := slices.IsSortedFunc(ds, objects.CompareDigests)
	var order []int // ds's indexes in key order, when ds is not in it
	if !sorted {
		order = objects.DigestOrder(len(ds), func(i int) *objects.Digest { return &ds[i] })
	}
	missing := make([]bool, len(ds))
	n := 0
	c := recordCursor{c: tx.Bucket(bucketBlobs).Cursor()}
	for k := range ds {
		i := k
		if !sorted {
			i = order[k]
		}
		if _, ok := c.at(ds[i]); !ok {
			missing[i] = true
			n++
		}
	}
	out := make([]objects.Digest, 0, n)
	for i, d := range ds {
		if missing[i] {
			out = append(out, d)
		}
	}
	return out
}

// PutRemote records the remote name at url, replacing an older url.
func PutRemote(tx *bolt.Tx, name, url string) error {
	b, err := tx.CreateBucketIfNotExists(bucketRemotes)
	if err != nil {
		return fmt.Errorf("store: remotes: %w", err)
	}
	if err := b.Put([]byte(name), []byte(url)); err != nil {
		return err
	}
	return journal.Add(tx, journal.Record{Op: journal.OpRemote, Name: name, Msg: url})
}

// RemoveRemote forgets the remote name and reports whether it was there.
func RemoveRemote(tx *bolt.Tx, name string) (bool, error) {
	b := tx.Bucket(bucketRemotes)
	if b == nil || b.Get([]byte(name)) == nil {
		return false, nil
	}
	if err := b.Delete([]byte(name)); err != nil {
		return false, err
	}
	return true, journal.Add(tx, journal.Record{Op: journal.OpRemoteRm, Name: name})
}

// Remotes returns every named remote's url, by name.
func Remotes(tx *bolt.Tx) map[string]string {
	out := map[string]string{}
	if b := tx.Bucket(bucketRemotes); b != nil {
		b.ForEach(func(k, v []byte) error {
			out[string(k)] = string(bytes.Clone(v))
			return nil
		})
	}
	return out
}

// OpenBlob opens the stored bytes of rec, unverified, for handing to a
// receiver that checks them itself (serve gives a loose blob's file to
// sendfile instead of reading and hashing it). A missing or short file is
// an integrity_error.
func (s *Store) OpenBlob(rec BlobRecord) (io.ReadSeekCloser, error) {
	if rec.Coded() {
		return nil, fmt.Errorf("store: blob %s is kept %s: read it with a BlobReader, which decodes it", rec.Digest.Short(), rec.Coding)
	}
	var path string
	switch rec.Encoding {
	case EncodingRaw:
		path = s.BlobPath(rec.Digest)
	case EncodingPacked:
		path = s.PackPath(rec.Pack)
	default:
		return nil, errs.New(errs.IntegrityError, "store", "blob %s: unknown encoding %d", rec.Digest.Short(), rec.Encoding)
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errs.New(errs.IntegrityError, "store", "blob %s is missing from the store (run `mstore fsck`)", rec.Digest.Short())
	}
	if err != nil {
		return nil, errs.Wrap(errs.IntegrityError, "store", err, "blob %s: unreadable", rec.Digest.Short())
	}
	info, err := f.Stat()
	if err != nil || info.Size() < rec.Offset+rec.Size || rec.Encoding == EncodingRaw && info.Size() != rec.Size {
		f.Close()
		return nil, errs.New(errs.IntegrityError, "store", "blob %s: its file does not have the recorded size (run `mstore fsck`)", rec.Digest.Short())
	}
	if rec.Encoding == EncodingRaw {
		return f, nil
	}
	return sectionFile{io.NewSectionReader(f, rec.Offset, rec.Size), f}, nil
}

type sectionFile struct {
	*io.SectionReader
	f *os.File
}

func (s sectionFile) Close() error { return s.f.Close() }

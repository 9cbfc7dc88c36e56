package store

import (
	"bytes"
	"encoding/hex"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/journal"
	"github.com/mstore/mstore/internal/objects"
)

// PutManifest records a manifest's canonical bytes under their digest. The
// blobs it needs, and the manifest itself as blob d (the copy that
// `fsck --rebuild-index` reads), must be recorded in the same transaction
// or before. The index keeps encoded itself until tx ends (a manifest of
// 100,000 tensors is 30 MB; no copy): the caller must not change it.
func PutManifest(tx *bolt.Tx, d objects.Digest, encoded []byte) error {
	b := tx.Bucket(bucketManifests)
	if b.Get(d[:]) != nil {
		return nil
	}
	if err := b.Put(d[:], encoded); err != nil {
		return fmt.Errorf("store: record manifest: %w", err)
	}
	return journal.Add(tx, journal.Record{Op: journal.OpManifest, Digest: d, Size: int64(len(encoded))})
}

// Manifest reads and decodes the manifest d, checking its digest.
func Manifest(tx *bolt.Tx, d objects.Digest) (*objects.Manifest, error) {
	v := tx.Bucket(bucketManifests).Get(d[:])
	if v == nil {
		return nil, errs.New(errs.NotFound, "store", "no manifest %s in this store", d.Short())
	}
	if err := objects.Verify(v, d, "manifest "+d.Short()); err != nil {
		return nil, err
	}
	// v dies with tx, but the decoded manifest copies what it keeps
	// (TestManifestOutlivesItsTransaction): no copy of a manifest of
	// 100,000 tensors (28 MB) first.
	return objects.DecodeManifest(v)
}

// ManifestIndex answers digest questions about the manifests in one
// transaction; refs.Resolve uses it.
type ManifestIndex struct{ Tx *bolt.Tx }

// HasManifest reports whether the manifest d is recorded.
func (m ManifestIndex) HasManifest(d objects.Digest) bool {
	return m.Tx.Bucket(bucketManifests).Get(d[:]) != nil
}

// ManifestsWithPrefix lists the manifests whose hex digest starts with prefix.
func (m ManifestIndex) ManifestsWithPrefix(prefix string) []objects.Digest {
	// Seek to the bytes of the even-length part of the prefix, then filter.
	even := prefix[:len(prefix)/2*2]
	seek, err := hex.DecodeString(even)
	if err != nil {
		return nil
	}
	var out []objects.Digest
	c := m.Tx.Bucket(bucketManifests).Cursor()
	for k, _ := c.Seek(seek); k != nil && bytes.HasPrefix(k, seek); k, _ = c.Next() {
		var d objects.Digest
		copy(d[:], k)
		if len(d.String()) >= len(prefix) && d.String()[:len(prefix)] == prefix {
			out = append(out, d)
		}
	}
	return out
}

// ForEachManifest calls fn with every manifest digest.
func ForEachManifest(tx *bolt.Tx, fn func(objects.Digest) error) error {
	return tx.Bucket(bucketManifests).ForEach(func(k, _ []byte) error {
		var d objects.Digest
		copy(d[:], k)
		return fn(d)
	})
}

// RemoveManifest deletes the manifest d (gc's sweep). It does not look at
// refs: gc checks, in the same transaction, that nothing names d.
func RemoveManifest(tx *bolt.Tx, d objects.Digest) error {
	if err := tx.Bucket(bucketManifests).Delete(d[:]); err != nil {
		return fmt.Errorf("store: remove manifest: %w", err)
	}
	return nil
}

// Version is a stored version as a reader of its blobs needs it: the
// manifest, its encoding, and the record of every blob it names.
type Version struct {
	Manifest *objects.Manifest
	Encoded  []byte
	Records  map[objects.Digest]BlobRecord
}

// ReadVersion takes the store lock shared, so that gc waits while the
// caller reads the version's blobs, and reads version d in one
// transaction. The caller releases the lock (Unlock) once its blobs are
// read; on an error nothing is held.
func (s *Store) ReadVersion(d objects.Digest) (*Version, *Lock, error) {
	lock, err := s.Lock(LockShared, 0)
	if err != nil {
		return nil, nil, err
	}
	v := &Version{}
	err = s.View(func(tx *bolt.Tx) (err error) {
		if v.Manifest, err = Manifest(tx, d); err != nil {
			return err
		}
		v.Encoded = ManifestBytes(tx, d)
		v.Records, err = Records(tx, v.Manifest.Blobs())
		return err
	})
	if err != nil {
		lock.Unlock()
		return nil, nil, err
	}
	return v, lock, nil
}

// ManifestBytes returns a copy of the encoded manifest d, or nil if there is
// none. It checks nothing: fsck does.
func ManifestBytes(tx *bolt.Tx, d objects.Digest) []byte {
	return bytes.Clone(tx.Bucket(bucketManifests).Get(d[:]))
}

// WriteManifestBlob makes the blob copy of manifest d durable (the copy
// `fsck --rebuild-index` reads back) unless the store records it already,
// and returns the records to commit with the manifest, in the same
// transaction as PutManifest. Every writer of a manifest that does not
// already stage it with its other blobs (as add does) calls this first.
func (s *Store) WriteManifestBlob(d objects.Digest, encoded []byte) ([]BlobRecord, error) {
	var have bool
	if err := s.View(func(tx *bolt.Tx) error {
		var err error
		_, have, err = Blob(tx, d)
		return err
	}); err != nil || have {
		return nil, err
	}
	w := s.NewBlobWriter(nil)
	defer w.Abort()
	if _, err := w.Put(d, encoded); err != nil {
		return nil, err
	}
	return w.Commit()
}

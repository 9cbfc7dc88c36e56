package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/journal"
	"github.com/mstore/mstore/internal/objects"
)

// bucketDeltaBases holds, for versions added with `add --base REF`, the
// version whose tensors repack codes theirs against (version → base). A
// store without the bucket has no such hints.
var bucketDeltaBases = []byte("delta_bases")

// SetDeltaBase records that version v's tensors are to be coded as deltas
// against those of version base (a hint for repack; journaled, so that
// `fsck --rebuild-index` keeps it).
func (s *Store) SetDeltaBase(v, base objects.Digest) error {
	return s.Update(func(tx *bolt.Tx) error { return putDeltaBase(tx, v, base) })
}

func putDeltaBase(tx *bolt.Tx, v, base objects.Digest) error {
	b, err := tx.CreateBucketIfNotExists(bucketDeltaBases)
	if err != nil {
		return fmt.Errorf("store: delta base: %w", err)
	}
	if err := b.Put(v[:], base[:]); err != nil {
		return fmt.Errorf("store: delta base: %w", err)
	}
	return journal.Add(tx, journal.Record{Op: journal.OpBase, Digest: v, Base: base})
}

// DeltaBaseHints returns every version → base hint SetDeltaBase recorded.
func DeltaBaseHints(tx *bolt.Tx) map[objects.Digest]objects.Digest {
	out := map[objects.Digest]objects.Digest{}
	if b := tx.Bucket(bucketDeltaBases); b != nil {
		b.ForEach(func(k, v []byte) error {
			if len(k) == len(objects.Digest{}) && len(v) == len(objects.Digest{}) {
				out[objects.Digest(k)] = objects.Digest(v)
			}
			return nil
		})
	}
	return out
}

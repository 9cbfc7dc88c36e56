package names

import (
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
)

// Copy makes the new ref to point at the version src names (any version
// name: NAME, NAME:TAG, a digest…), with a fresh history of one entry
// (refs.Copy). It is one transaction, journaled like every ref move.
func Copy(st *store.Store, src, to string) (objects.Digest, error) {
	spec, err := refs.ParseSpec(src)
	if err != nil {
		return objects.Digest{}, err
	}
	var d objects.Digest
	err = st.Update(func(tx *bolt.Tx) error {
		if d, err = refs.Resolve(tx, spec, store.ManifestIndex{Tx: tx}); err != nil {
			return err
		}
		if !(store.ManifestIndex{Tx: tx}).HasManifest(d) {
			return errs.New(errs.NotFound, "cp", "version %s is no longer in the store", d.Short())
		}
		_, err = refs.Copy(tx, to, d, "copied from "+src, time.Now())
		return err
	})
	return d, err
}

// Rename renames the ref from to to with its history (refs.Rename), in
// one transaction.
func Rename(st *store.Store, from, to string) (moved int, err error) {
	err = st.Update(func(tx *bolt.Tx) error {
		moved, err = refs.Rename(tx, from, to)
		return err
	})
	return moved, err
}

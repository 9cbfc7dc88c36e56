package names

import (
	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
)

// Tags lists the tags of name, or every tag when name is "", in (name,
// tag) order.
func Tags(st *store.Store, name string) (out []refs.TagRef, err error) {
	err = st.View(func(tx *bolt.Tx) error {
		if name == "" {
			out, err = refs.Tags(tx)
		} else {
			out, err = refs.TagsOf(tx, name)
		}
		return err
	})
	return out, err
}

// LogicalSizes is the size of the files of each version of ds that the
// store has (a missing or unreadable one is left out), in one read.
func LogicalSizes(st *store.Store, ds []objects.Digest) (map[objects.Digest]int64, error) {
	out := make(map[objects.Digest]int64, len(ds))
	err := st.View(func(tx *bolt.Tx) error {
		for _, d := range ds {
			if n, err := logicalBytes(st, tx, d); err == nil {
				out[d] = n
			}
		}
		return nil
	})
	return out, err
}

// logicalBytes is the size of version d's files, from its record
// (store.ManifestLogicalBytes), so that listing thousands of versions does
// not read thousands of manifests; a manifest in another shape is decoded.
func logicalBytes(st *store.Store, tx *bolt.Tx, d objects.Digest) (int64, error) {
	if n, ok := store.ManifestLogicalBytes(tx, d); ok {
		return n, nil
	}
	m, err := st.Manifest(tx, d)
	if err != nil {
		return 0, err
	}
	return m.LogicalBytes(), nil
}

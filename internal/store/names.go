package store

import (
	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/journal"
	"github.com/mstore/mstore/internal/objects"
)

// Names is the layer of names above the store (refs.Layer, handed over by
// package names), which fsck and the index rebuild call into: the store
// does not import it, and it does not import the store.
type Names interface {
	// Check verifies the names' own records (one integrity_error).
	Check(tx *bolt.Tx) error
	// EachName calls fn for every name of a version, and counts the refs
	// and tags.
	EachName(tx *bolt.Tx, fn func(kind, name string, d objects.Digest, what string)) (refs, tags int, problems []error)
	// Referenced is every version a name reaches.
	Referenced(tx *bolt.Tx) (map[objects.Digest]bool, error)
	// Replay applies the journal's name records to a rebuilt index.
	Replay(tx *bolt.Tx, log *journal.Log, problem func(string, ...any))
}

package refs

import (
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// Copy makes the new ref to point at d with a history of its own: one
// entry, whose message says where it came from (as ollama cp does, the copy
// shares the bytes, not the past). to must not be a ref yet (conflict).
func Copy(tx *bolt.Tx, to string, d objects.Digest, message string, at time.Time) (Entry, error) {
	if err := refusePresent(tx, to); err != nil {
		return Entry{}, err
	}
	return Move(tx, to, d, message, at)
}

// Rename moves the ref from, with its whole history (messages and times),
// to the name to, which must not be a ref yet (conflict). It is made of the
// moves and the removal that the journal already records and replays
// (Move for each entry, oldest first, then RemoveRef), so a rebuilt index
// has the renamed history exactly as this one does. The entries are
// numbered again from 1: a gap left by TrimHistory does not survive the
// rename. Tags stay with from: NAME:TAG keeps meaning what it meant.
func Rename(tx *bolt.Tx, from, to string) (moved int, err error) {
	if from == to {
		return 0, errs.New(errs.Conflict, pkg, "mv %s %s: the names are the same", from, to)
	}
	hist, err := History(tx, from)
	if err != nil {
		return 0, err
	}
	if err := refusePresent(tx, to); err != nil {
		return 0, err
	}
	for i := len(hist) - 1; i >= 0; i-- {
		e := hist[i]
		if _, err := Move(tx, to, e.Digest, e.Message, e.Time); err != nil {
			return 0, err
		}
	}
	return len(hist), RemoveRef(tx, from)
}

func refusePresent(tx *bolt.Tx, name string) error {
	if _, err := ParseName(name); err != nil {
		return err
	}
	rec, err := readRef(tx.Bucket(bucketRefs), name)
	if err != nil {
		return err
	}
	if rec != nil {
		return errs.New(errs.Conflict, pkg, "ref %q exists (at %s); choose another name, or `mstore rm %s` first", name, rec.current.Short(), name)
	}
	return nil
}

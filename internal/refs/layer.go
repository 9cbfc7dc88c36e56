package refs

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/journal"
	"github.com/mstore/mstore/internal/objects"
)

// Layer is the refs as the store's fsck and index rebuild see them
// (store.Names): the store calls into it without importing this package,
// and package names hands it over.
type Layer struct{}

// Check verifies the refs' buckets (Check).
func (Layer) Check(tx *bolt.Tx) error { return Check(tx) }

// EachName calls fn for every name of a version: each ref (its current
// version), each older entry of its history (NAME~N) and each tag. It
// returns how many refs and tags there are, and the problems met reading
// them.
func (Layer) EachName(tx *bolt.Tx, fn func(kind, name string, d objects.Digest, what string)) (refCount, tagCount int, problems []error) {
	list, err := List(tx)
	if err != nil {
		problems = append(problems, err)
	}
	for _, ref := range list {
		refCount++
		fn("ref", ref.Name, ref.Current, "its current version")
		hist, err := History(tx, ref.Name)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		for i, e := range hist {
			if i > 0 { // the newest entry is the current version
				fn("ref", fmt.Sprintf("%s~%d", ref.Name, i), e.Digest, fmt.Sprintf("%s~%d", ref.Name, i))
			}
		}
	}
	tags, err := Tags(tx)
	if err != nil {
		problems = append(problems, err)
	}
	for _, t := range tags {
		tagCount++
		fn("tag", t.String(), t.Digest, "a tag")
	}
	return refCount, tagCount, problems
}

// Referenced is every version a name reaches (Referenced).
func (Layer) Referenced(tx *bolt.Tx) (map[objects.Digest]bool, error) { return Referenced(tx) }

// Replay applies the journal's ref moves, tags, trims and removals in
// order, through the same functions that made them, so that histories keep
// their sequence numbers and times.
func (Layer) Replay(tx *bolt.Tx, log *journal.Log, problem func(string, ...any)) {
	for _, b := range log.Batches {
		for _, rec := range b.Records {
			var err error
			switch rec.Op {
			case journal.OpMove:
				var at time.Time
				if at, err = time.Parse(time.RFC3339Nano, rec.Time); err == nil {
					_, err = Move(tx, rec.Name, rec.Digest, rec.Msg, at)
				}
			case journal.OpTag:
				_, err = Tag(tx, rec.Name, rec.Tag, rec.Digest)
			case journal.OpUntag:
				err = RemoveTag(tx, rec.Name, rec.Tag)
			case journal.OpRemoveRef:
				err = RemoveRef(tx, rec.Name)
			case journal.OpTrim:
				_, err = TrimHistory(tx, rec.Name, rec.Keep)
			}
			if err != nil {
				problem("journal batch %d: %s %s: %v", b.Seq, rec.Op, rec.Name, err)
			}
		}
	}
}

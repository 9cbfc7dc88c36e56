package refs

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/journal"
	"github.com/mstore/mstore/internal/objects"
)

const pkg = "refs"

// MaxMessageLen bounds a history entry's message, in bytes.
const MaxMessageLen = 64 << 10

var (
	bucketRefs    = []byte("refs")
	bucketHistory = []byte("history")
	bucketTags    = []byte("tags")
	// bucketRetired keeps, for every removed tag, the digest it named, so
	// that the tag can never come back pointing anywhere else.
	bucketRetired = []byte("retired_tags")
)

// tagSep separates name and tag in a key of the "tags" bucket. It sorts
// before every byte a name may hold, so the bucket's order is (name, tag)
// order and a name's tags are one contiguous run.
const tagSep = 0x00

// Entry is one move of a ref, as its history records it.
type Entry struct {
	// Seq numbers the ref's moves from 1; it is never reused, even after
	// TrimHistory, so a gap shows that entries were trimmed.
	Seq      uint64
	Digest   objects.Digest // where the ref moved to
	Previous objects.Digest // where it was before; zero for its first move
	Message  string
	Time     time.Time // UTC
}

// Ref is a summary of one ref, as List returns it.
type Ref struct {
	Name    string
	Current objects.Digest
	Entries int       // history entries kept
	Moved   time.Time // time of the newest entry, UTC
}

// TagRef is one tag: NAME:TAG and the digest it names.
type TagRef struct {
	Name   string
	Tag    string
	Digest objects.Digest
}

// String is NAME:TAG.
func (t TagRef) String() string { return t.Name + ":" + t.Tag }

// Init creates the buckets refs owns. It is idempotent. Every write creates
// them as well, so Init is only needed to lay out a fresh store.
func Init(tx *bolt.Tx) error {
	for _, b := range [][]byte{bucketRefs, bucketHistory, bucketTags, bucketRetired} {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return fmt.Errorf("refs: create bucket %q: %w", b, err)
		}
	}
	return nil
}

// writeBuckets returns the three buckets of a writable transaction.
func writeBuckets(tx *bolt.Tx) (refsB, histB, tagsB *bolt.Bucket, err error) {
	if err := Init(tx); err != nil {
		return nil, nil, nil, err
	}
	return tx.Bucket(bucketRefs), tx.Bucket(bucketHistory), tx.Bucket(bucketTags), nil
}

// readRef returns the record of name, or nil without error if there is none.
func readRef(refsB *bolt.Bucket, name string) (*refRecord, error) {
	if refsB == nil {
		return nil, nil
	}
	v := refsB.Get([]byte(name))
	if v == nil {
		return nil, nil
	}
	r, err := decodeRef(name, v)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

func noRef(name string) error {
	hint := "run `mstore ls` to see names"
	if isHex(name) && len(name) < objects.MinPrefix {
		hint += "; a digest prefix needs at least 8 hex digits"
	}
	return errs.New(errs.NotFound, pkg, "no ref %q; %s", name, hint)
}

// Move points the ref name at to and appends an entry to its history,
// creating the ref if it does not exist. Moving a ref to the digest it
// already points at changes nothing: no entry is appended, and the entry
// returned is the newest one already there (compare its Time or Seq).
//
// Move does not check that to names a manifest; the store does.
func Move(tx *bolt.Tx, name string, to objects.Digest, message string, at time.Time) (Entry, error) {
	if _, err := ParseName(name); err != nil {
		return Entry{}, err
	}
	if to.IsZero() {
		return Entry{}, errs.New(errs.SchemaError, pkg, "move %q: no digest given", name)
	}
	if len(message) > MaxMessageLen {
		return Entry{}, errs.New(errs.SizeLimitExceeded, pkg, "move %q: message of %d bytes (at most %d)", name, len(message), MaxMessageLen)
	}
	refsB, histB, _, err := writeBuckets(tx)
	if err != nil {
		return Entry{}, err
	}
	rec, err := readRef(refsB, name)
	if err != nil {
		return Entry{}, err
	}
	hist := histB.Bucket([]byte(name))
	if rec == nil && hist != nil {
		return Entry{}, errs.New(errs.IntegrityError, pkg, "ref %q has a history but no record", name)
	}
	if rec != nil && hist == nil {
		return Entry{}, errs.New(errs.IntegrityError, pkg, "ref %q has a record but no history", name)
	}
	if rec != nil && rec.current == to {
		k, v := hist.Cursor().Last()
		if k == nil {
			return Entry{}, errs.New(errs.IntegrityError, pkg, "ref %q has an empty history", name)
		}
		return decodeEntry(name, k, v)
	}
	if hist == nil {
		if hist, err = histB.CreateBucket([]byte(name)); err != nil {
			return Entry{}, fmt.Errorf("refs: create history of %q: %w", name, err)
		}
		rec = &refRecord{}
	}
	seq, err := hist.NextSequence()
	if err != nil {
		return Entry{}, fmt.Errorf("refs: history of %q: %w", name, err)
	}
	// Return the time as it will read back: UTC, without a monotonic reading.
	e := Entry{Seq: seq, Digest: to, Previous: rec.current, Message: message, Time: time.Unix(at.Unix(), int64(at.Nanosecond())).UTC()}
	if err := hist.Put(seqKey(seq), encodeEntry(e)); err != nil {
		return Entry{}, fmt.Errorf("refs: append to history of %q: %w", name, err)
	}
	rec.current, rec.entries, rec.moved = to, rec.entries+1, e.Time
	if err := refsB.Put([]byte(name), rec.encode()); err != nil {
		return Entry{}, fmt.Errorf("refs: record ref %q: %w", name, err)
	}
	return e, journal.Add(tx, journal.Record{Op: journal.OpMove, Name: name, Digest: to, Msg: message, Time: e.Time.Format(time.RFC3339Nano)})
}

func tagKey(name, tag string) []byte {
	k := make([]byte, 0, len(name)+1+len(tag))
	k = append(k, name...)
	k = append(k, tagSep)
	return append(k, tag...)
}

// Tag creates the tag name:tag at d. Tags are immutable: creating one that
// exists at d is a no-op (created is false), and at another digest is a
// conflict. A tag does not need a ref of the same name, and outlives it.
//
// Tag does not check that d names a manifest; the store does.
func Tag(tx *bolt.Tx, name, tag string, d objects.Digest) (created bool, err error) {
	if _, err := ParseName(name); err != nil {
		return false, err
	}
	if _, err := ParseTag(tag); err != nil {
		return false, err
	}
	if d.IsZero() {
		return false, errs.New(errs.SchemaError, pkg, "tag %s:%s: no digest given", name, tag)
	}
	_, _, tagsB, err := writeBuckets(tx)
	if err != nil {
		return false, err
	}
	k := tagKey(name, tag)
	if v := tagsB.Get(k); v != nil {
		old, err := decodeTag(name+":"+tag, v)
		if err != nil {
			return false, err
		}
		if old == d {
			return false, nil
		}
		return false, errs.New(errs.Conflict, pkg, "tag %s:%s already points at %s and cannot move to %s (tags are immutable; choose another tag)", name, tag, old, d)
	}
	retiredB := tx.Bucket(bucketRetired)
	if v := retiredB.Get(k); v != nil {
		old, err := decodeTag(name+":"+tag, v)
		if err != nil {
			return false, err
		}
		if old != d {
			return false, errs.New(errs.Conflict, pkg, "tag %s:%s was removed while it named %s; a tag never names another version (choose another tag)", name, tag, old)
		}
		if err := retiredB.Delete(k); err != nil {
			return false, fmt.Errorf("refs: restore tag %s:%s: %w", name, tag, err)
		}
	}
	if err := tagsB.Put(k, encodeTag(d)); err != nil {
		return false, fmt.Errorf("refs: record tag %s:%s: %w", name, tag, err)
	}
	return true, journal.Add(tx, journal.Record{Op: journal.OpTag, Name: name, Tag: tag, Digest: d})
}

// RemoveRef removes the ref name and its whole history. Its tags stay: a
// tag is a promise that NAME:TAG always means the same version, and removing
// a ref should not break it (as in git, remove tags one by one with
// RemoveTag).
func RemoveRef(tx *bolt.Tx, name string) error {
	if _, err := ParseName(name); err != nil {
		return err
	}
	refsB, histB, _, err := writeBuckets(tx)
	if err != nil {
		return err
	}
	if refsB.Get([]byte(name)) == nil {
		return noRef(name)
	}
	if err := refsB.Delete([]byte(name)); err != nil {
		return fmt.Errorf("refs: remove ref %q: %w", name, err)
	}
	if err := histB.DeleteBucket([]byte(name)); err != nil && !errors.Is(err, bolt.ErrBucketNotFound) {
		return fmt.Errorf("refs: remove history of %q: %w", name, err)
	}
	return journal.Add(tx, journal.Record{Op: journal.OpRemoveRef, Name: name})
}

// RemoveTag removes the tag name:tag, so that it no longer keeps its version
// from gc. The digest it named is remembered: the tag can be created again
// only at that same digest.
func RemoveTag(tx *bolt.Tx, name, tag string) error {
	if _, err := ParseName(name); err != nil {
		return err
	}
	if _, err := ParseTag(tag); err != nil {
		return err
	}
	_, _, tagsB, err := writeBuckets(tx)
	if err != nil {
		return err
	}
	k := tagKey(name, tag)
	if tagsB.Get(k) == nil {
		return errs.New(errs.NotFound, pkg, "no tag %s:%s; run `mstore ls` to see tags", name, tag)
	}
	if err := tx.Bucket(bucketRetired).Put(k, bytes.Clone(tagsB.Get(k))); err != nil {
		return fmt.Errorf("refs: retire tag %s:%s: %w", name, tag, err)
	}
	if err := tagsB.Delete(k); err != nil {
		return fmt.Errorf("refs: remove tag %s:%s: %w", name, tag, err)
	}
	return journal.Add(tx, journal.Record{Op: journal.OpUntag, Name: name, Tag: tag})
}

// TrimHistory drops all but the newest keep entries of name's history and
// returns how many it dropped. The newest entry (the current target) always
// stays: keep below 1 counts as 1. The entries kept keep their Seq.
func TrimHistory(tx *bolt.Tx, name string, keep int) (removed int, err error) {
	if _, err := ParseName(name); err != nil {
		return 0, err
	}
	keep = max(keep, 1)
	refsB, histB, _, err := writeBuckets(tx)
	if err != nil {
		return 0, err
	}
	rec, err := readRef(refsB, name)
	if err != nil {
		return 0, err
	}
	if rec == nil {
		return 0, noRef(name)
	}
	hist := histB.Bucket([]byte(name))
	if hist == nil {
		return 0, errs.New(errs.IntegrityError, pkg, "ref %q has a record but no history", name)
	}
	var drop [][]byte
	c := hist.Cursor()
	n := 0
	for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
		if n++; n > keep {
			drop = append(drop, bytes.Clone(k))
		}
	}
	for _, k := range drop {
		if err := hist.Delete(k); err != nil {
			return 0, fmt.Errorf("refs: trim history of %q: %w", name, err)
		}
	}
	rec.entries = uint64(n - len(drop))
	if err := refsB.Put([]byte(name), rec.encode()); err != nil {
		return 0, fmt.Errorf("refs: record ref %q: %w", name, err)
	}
	if len(drop) == 0 {
		return 0, nil
	}
	return len(drop), journal.Add(tx, journal.Record{Op: journal.OpTrim, Name: name, Keep: keep})
}

// Current returns the digest the ref name points at.
func Current(tx *bolt.Tx, name string) (objects.Digest, error) {
	if _, err := ParseName(name); err != nil {
		return objects.Digest{}, err
	}
	rec, err := readRef(tx.Bucket(bucketRefs), name)
	if err != nil {
		return objects.Digest{}, err
	}
	if rec == nil {
		return objects.Digest{}, noRef(name)
	}
	return rec.current, nil
}

// History returns name's history, newest entry first.
func History(tx *bolt.Tx, name string) ([]Entry, error) {
	if _, err := ParseName(name); err != nil {
		return nil, err
	}
	rec, err := readRef(tx.Bucket(bucketRefs), name)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, noRef(name)
	}
	hist := historyOf(tx, name)
	if hist == nil {
		return nil, errs.New(errs.IntegrityError, pkg, "ref %q has a record but no history", name)
	}
	out := make([]Entry, 0, rec.entries)
	c := hist.Cursor()
	for k, v := c.Last(); k != nil; k, v = c.Prev() {
		e, err := decodeEntry(name, k, v)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func historyOf(tx *bolt.Tx, name string) *bolt.Bucket {
	histB := tx.Bucket(bucketHistory)
	if histB == nil {
		return nil
	}
	return histB.Bucket([]byte(name))
}

// List returns every ref, in name order.
func List(tx *bolt.Tx) ([]Ref, error) {
	refsB := tx.Bucket(bucketRefs)
	if refsB == nil {
		return nil, nil
	}
	var out []Ref
	err := refsB.ForEach(func(k, v []byte) error {
		name := string(k)
		r, err := decodeRef(name, v)
		if err != nil {
			return err
		}
		out = append(out, Ref{Name: name, Current: r.current, Entries: int(r.entries), Moved: r.moved})
		return nil
	})
	return out, err
}

// Tags returns every tag, in (name, tag) order.
func Tags(tx *bolt.Tx) ([]TagRef, error) { return scanTags(tx, nil) }

// TagsOf returns the tags of name, in tag order; none is not an error.
func TagsOf(tx *bolt.Tx, name string) ([]TagRef, error) {
	if _, err := ParseName(name); err != nil {
		return nil, err
	}
	return scanTags(tx, tagKey(name, ""))
}

func scanTags(tx *bolt.Tx, prefix []byte) ([]TagRef, error) {
	tagsB := tx.Bucket(bucketTags)
	if tagsB == nil {
		return nil, nil
	}
	var out []TagRef
	c := tagsB.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		name, tag, ok := strings.Cut(string(k), string(rune(tagSep)))
		if !ok {
			return nil, errs.New(errs.IntegrityError, pkg, "tag key %q has no separator", k)
		}
		d, err := decodeTag(name+":"+tag, v)
		if err != nil {
			return nil, err
		}
		out = append(out, TagRef{Name: name, Tag: tag, Digest: d})
	}
	return out, nil
}

// Referenced returns every digest that a ref's history or a tag names: what
// a garbage collector must keep. It fails rather than skip a record it
// cannot read, since a skipped record would let gc delete a live version.
func Referenced(tx *bolt.Tx) (map[objects.Digest]bool, error) {
	out := map[objects.Digest]bool{}
	if refsB := tx.Bucket(bucketRefs); refsB != nil {
		err := refsB.ForEach(func(k, v []byte) error {
			r, err := decodeRef(string(k), v)
			out[r.current] = true
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	if histB := tx.Bucket(bucketHistory); histB != nil {
		err := histB.ForEachBucket(func(name []byte) error {
			return histB.Bucket(name).ForEach(func(k, v []byte) error {
				e, err := decodeEntry(string(name), k, v)
				out[e.Digest] = true
				return err
			})
		})
		if err != nil {
			return nil, err
		}
	}
	tags, err := Tags(tx)
	if err != nil {
		return nil, err
	}
	for _, t := range tags {
		out[t.Digest] = true
	}
	delete(out, objects.Digest{})
	return out, nil
}

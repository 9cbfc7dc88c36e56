package refs

import (
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
)

// Check verifies that refs' buckets agree with themselves: every ref has a
// history whose newest entry is its current target and whose length and time
// it records, every history belongs to a ref, history entries are in order
// and each one's Previous is the entry before it, and every name, tag and
// record is well-formed. It reports every problem it finds (as one
// integrity_error), for fsck. It does not check that digests name
// manifests; the store does that with Referenced.
func Check(tx *bolt.Tx) error {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	refsB, histB, tagsB := tx.Bucket(bucketRefs), tx.Bucket(bucketHistory), tx.Bucket(bucketTags)

	if refsB != nil {
		_ = refsB.ForEach(func(k, v []byte) error {
			name := string(k)
			if v == nil {
				bad("refs bucket holds a bucket %q", name)
				return nil
			}
			if !ValidName(name) {
				bad("ref %q: invalid name", name)
			}
			rec, err := decodeRef(name, v)
			if err != nil {
				bad("%v", err)
				return nil
			}
			var hist *bolt.Bucket
			if histB != nil {
				hist = histB.Bucket(k)
			}
			if hist == nil {
				bad("ref %q has no history", name)
				return nil
			}
			checkHistory(name, hist, rec, bad)
			return nil
		})
	}
	if histB != nil {
		_ = histB.ForEach(func(k, v []byte) error {
			if v != nil {
				bad("history bucket holds a value under %q", k)
			} else if refsB == nil || refsB.Get(k) == nil {
				bad("history of %q belongs to no ref", k)
			}
			return nil
		})
	}
	if tagsB != nil {
		_ = tagsB.ForEach(func(k, v []byte) error {
			name, tag, ok := strings.Cut(string(k), string(rune(tagSep)))
			switch {
			case v == nil:
				bad("tags bucket holds a bucket %q", k)
			case !ok || !ValidName(name) || !ValidTag(tag):
				bad("tag key %q is not NAME, NUL, TAG", k)
			default:
				if d, err := decodeTag(name+":"+tag, v); err != nil {
					bad("%v", err)
				} else if d.IsZero() {
					bad("tag %s:%s names no digest", name, tag)
				}
			}
			return nil
		})
	}
	if len(problems) == 0 {
		return nil
	}
	return errs.New(errs.IntegrityError, pkg, "%d problem(s): %s", len(problems), strings.Join(problems, "; "))
}

func checkHistory(name string, hist *bolt.Bucket, rec refRecord, bad func(string, ...any)) {
	var (
		n    uint64
		prev Entry
	)
	_ = hist.ForEach(func(k, v []byte) error {
		if v == nil {
			bad("history of %q holds a bucket", name)
			return nil
		}
		e, err := decodeEntry(name, k, v)
		if err != nil {
			bad("%v", err)
			return nil
		}
		n++
		switch {
		case e.Seq == 0:
			bad("history of %q: entry with seq 0", name)
		case e.Seq > hist.Sequence():
			bad("history of %q: entry %d beyond the bucket's sequence %d", name, e.Seq, hist.Sequence())
		case e.Digest.IsZero():
			bad("history of %q: entry %d names no digest", name, e.Seq)
		case e.Digest == e.Previous:
			bad("history of %q: entry %d does not move", name, e.Seq)
		case n == 1 && e.Seq == 1 && !e.Previous.IsZero():
			bad("history of %q: first entry has a previous digest", name)
		case n > 1 && e.Previous != prev.Digest:
			bad("history of %q: entry %d follows %s, not %s", name, e.Seq, e.Previous.Short(), prev.Digest.Short())
		}
		prev = e
		return nil
	})
	switch {
	case n == 0:
		bad("ref %q has an empty history", name)
	case n != rec.entries:
		bad("ref %q records %d history entries, has %d", name, rec.entries, n)
	case prev.Digest != rec.current:
		bad("ref %q points at %s, its newest entry at %s", name, rec.current.Short(), prev.Digest.Short())
	case !prev.Time.Equal(rec.moved):
		bad("ref %q records its last move at %s, its newest entry says %s", name, rec.moved, prev.Time)
	}
}

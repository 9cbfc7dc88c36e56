package refs

import (
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// Holder is one name that keeps a version from gc: a ref's current target
// (NAME), an older entry of its history (NAME~N) or a tag (NAME:TAG).
type Holder struct {
	Name string `json:"name"`
	Tag  string `json:"tag,omitempty"`
	Back int    `json:"back,omitempty"` // moves back in Name's history; 0 is its current target
}

// String is the version name the holder is: NAME, NAME~N or NAME:TAG.
func (h Holder) String() string {
	switch {
	case h.Tag != "":
		return h.Name + ":" + h.Tag
	case h.Back > 0:
		return fmt.Sprintf("%s~%d", h.Name, h.Back)
	}
	return h.Name
}

// Without is a change to the names that has not been made: what rm, trim
// or the loss of every name of a version would take away. gc plans with
// it to say what such a change would free (gc.Estimate), before anything
// is changed.
type Without struct {
	Refs     map[string]bool         // refs removed with their history (rm NAME)
	Tags     map[string]bool         // tags removed, as NAME:TAG (rm NAME:TAG)
	Keep     map[string]int          // histories trimmed to their newest N entries (trim --keep N)
	Versions map[objects.Digest]bool // versions no name keeps any more
}

// drops reports whether h goes under w.
func (w Without) drops(h Holder, d objects.Digest) bool {
	switch {
	case w.Versions[d]:
		return true
	case h.Tag != "":
		return w.Tags[h.String()]
	case w.Refs[h.Name]:
		return true
	}
	keep, ok := w.Keep[h.Name]
	return ok && h.Back >= max(keep, 1)
}

// Holders returns, for every version some name keeps, the names that keep
// it (kept), and the names that w takes away (dropped), both by digest. It
// reads what Referenced reads and, like it, fails rather than skip a record
// it cannot read. The keys of kept are what gc must keep once w is done.
func Holders(tx *bolt.Tx, w Without) (kept, dropped map[objects.Digest][]Holder, err error) {
	kept, dropped = map[objects.Digest][]Holder{}, map[objects.Digest][]Holder{}
	add := func(h Holder, d objects.Digest) {
		if d.IsZero() {
			return
		}
		if w.drops(h, d) {
			dropped[d] = append(dropped[d], h)
		} else {
			kept[d] = append(kept[d], h)
		}
	}
	list, err := List(tx)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range list {
		add(Holder{Name: r.Name}, r.Current)
		hist := historyOf(tx, r.Name)
		if hist == nil {
			return nil, nil, errs.New(errs.IntegrityError, pkg, "ref %q has a record but no history", r.Name)
		}
		back := 0
		c := hist.Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			e, err := decodeEntry(r.Name, k, v)
			if err != nil {
				return nil, nil, err
			}
			if back > 0 || e.Digest != r.Current { // the newest entry is NAME itself
				add(Holder{Name: r.Name, Back: back}, e.Digest)
			}
			back++
		}
	}
	tags, err := Tags(tx)
	if err != nil {
		return nil, nil, err
	}
	for _, t := range tags {
		add(Holder{Name: t.Name, Tag: t.Tag}, t.Digest)
	}
	return kept, dropped, nil
}

// CheckWithout fails with not_found when w names a ref or tag that does not
// exist, so that a dry run refuses what the real command would refuse.
func CheckWithout(tx *bolt.Tx, w Without) error {
	for name := range w.Refs {
		if _, err := Current(tx, name); err != nil {
			return err
		}
	}
	for name := range w.Keep {
		if _, err := Current(tx, name); err != nil {
			return err
		}
	}
	for nt := range w.Tags {
		spec, err := ParseSpec(nt)
		if err != nil {
			return err
		}
		if _, err := resolveTag(tx, spec.Name, spec.Tag); err != nil {
			return err
		}
	}
	return nil
}

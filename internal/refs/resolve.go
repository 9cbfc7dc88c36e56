package refs

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// ManifestIndex answers what Resolve needs to know about the store's
// manifests. The store implements it over the same transaction.
type ManifestIndex interface {
	HasManifest(d objects.Digest) bool
	// ManifestsWithPrefix lists the manifests whose hex digest starts with
	// prefix (8 to 64 lowercase hex digits).
	ManifestsWithPrefix(prefix string) []objects.Digest
}

// Resolve returns the manifest digest that spec names:
//
//   - NAME: the ref's current target.
//   - NAME:TAG: the tag's digest.
//   - NAME@DIGEST: the digest, only if it is in NAME's history (a prefix must
//     match exactly one digest there); a manifest outside the history is
//     refused, which is what makes a pinned pull safe.
//   - DIGEST: the one manifest with that digest or prefix. A string that is
//     also the name of an existing ref resolves as that ref.
//   - NAME~N: the entry N moves back in NAME's history; NAME~0 is NAME.
//
// Anything unknown, and a prefix that matches more than one digest, is a
// not_found whose message says what to try next. manifests is only asked
// about bare digests; nil means the store has no manifests.
func Resolve(tx *bolt.Tx, spec Spec, manifests ManifestIndex) (objects.Digest, error) {
	if err := validSpec(spec); err != nil {
		return objects.Digest{}, err
	}
	switch spec.Kind {
	case KindRef:
		return Current(tx, spec.Name)
	case KindTag:
		return resolveTag(tx, spec.Name, spec.Tag)
	case KindPinned:
		return resolvePinned(tx, spec.Name, spec.Digest)
	case KindBack:
		return resolveBack(tx, spec.Name, spec.Back)
	default: // KindDigest
		rec, err := readRef(tx.Bucket(bucketRefs), spec.Name)
		if err != nil {
			return objects.Digest{}, err
		}
		if rec != nil {
			return rec.current, nil
		}
		return resolveDigest(spec.Digest, manifests)
	}
}

// validSpec checks a Spec that may have been built by hand.
func validSpec(s Spec) error {
	if s.Kind < KindRef || s.Kind > KindBack {
		return errs.New(errs.SchemaError, pkg, "version name of unknown kind %d", s.Kind)
	}
	if p, err := ParseSpec(s.String()); err != nil {
		return err
	} else if p != s {
		return errs.New(errs.SchemaError, pkg, "version name %q is not in canonical form", s)
	}
	return nil
}

func resolveTag(tx *bolt.Tx, name, tag string) (objects.Digest, error) {
	if tagsB := tx.Bucket(bucketTags); tagsB != nil {
		if v := tagsB.Get(tagKey(name, tag)); v != nil {
			return decodeTag(name+":"+tag, v)
		}
	}
	tags, err := TagsOf(tx, name)
	if err != nil {
		return objects.Digest{}, err
	}
	if len(tags) == 0 {
		return objects.Digest{}, errs.New(errs.NotFound, pkg, "no tag %s:%s (%s has no tags); run `mstore ls` to see tags", name, tag, name)
	}
	names := make([]string, len(tags))
	for i, t := range tags {
		names[i] = t.Tag
	}
	return objects.Digest{}, errs.New(errs.NotFound, pkg, "no tag %s:%s; %s has tags %s", name, tag, name, listSome(names))
}

func resolvePinned(tx *bolt.Tx, name, prefix string) (objects.Digest, error) {
	if _, err := Current(tx, name); err != nil {
		return objects.Digest{}, err
	}
	hist := historyOf(tx, name)
	if hist == nil {
		return objects.Digest{}, errs.New(errs.IntegrityError, pkg, "ref %q has a record but no history", name)
	}
	seen := map[objects.Digest]bool{}
	var found []objects.Digest
	err := hist.ForEach(func(k, v []byte) error {
		e, err := decodeEntry(name, k, v)
		if err != nil {
			return err
		}
		if !seen[e.Digest] && strings.HasPrefix(e.Digest.String(), prefix) {
			found = append(found, e.Digest)
		}
		seen[e.Digest] = true
		return nil
	})
	if err != nil {
		return objects.Digest{}, err
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return objects.Digest{}, errs.New(errs.NotFound, pkg, "%s is not in the history of %q; run `mstore log %s` to see its versions", prefix, name, name)
	}
	return objects.Digest{}, ambiguous(prefix, found, "the history of "+name)
}

func resolveBack(tx *bolt.Tx, name string, back int) (objects.Digest, error) {
	cur, err := Current(tx, name)
	if err != nil || back == 0 {
		return cur, err
	}
	hist := historyOf(tx, name)
	if hist == nil {
		return objects.Digest{}, errs.New(errs.IntegrityError, pkg, "ref %q has a record but no history", name)
	}
	c := hist.Cursor()
	k, v := c.Last()
	n := 0
	for ; k != nil && n < back; n++ {
		k, v = c.Prev()
	}
	if k == nil {
		return objects.Digest{}, errs.New(errs.NotFound, pkg, "%s~%d goes back further than the %d entries in the history of %q; run `mstore log %s`", name, back, n, name, name)
	}
	e, err := decodeEntry(name, k, v)
	return e.Digest, err
}

func resolveDigest(prefix string, manifests ManifestIndex) (objects.Digest, error) {
	notFound := errs.New(errs.NotFound, pkg, "no version %s in this store; run `mstore ls` to see versions", prefix)
	if manifests == nil {
		return objects.Digest{}, notFound
	}
	if len(prefix) == 64 {
		d, err := objects.ParseDigest(prefix)
		if err != nil {
			return objects.Digest{}, err
		}
		if !manifests.HasManifest(d) {
			return objects.Digest{}, notFound
		}
		return d, nil
	}
	found := dedupe(manifests.ManifestsWithPrefix(prefix))
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return objects.Digest{}, notFound
	}
	return objects.Digest{}, ambiguous(prefix, found, "this store")
}

// dedupe sorts ds and drops repeats.
func dedupe(ds []objects.Digest) []objects.Digest {
	ds = append([]objects.Digest(nil), ds...)
	sort.Slice(ds, func(i, j int) bool { return bytes.Compare(ds[i][:], ds[j][:]) < 0 })
	out := ds[:0]
	for i, d := range ds {
		if i == 0 || d != ds[i-1] {
			out = append(out, d)
		}
	}
	return out
}

// ambiguous is the error for a prefix that matches several digests. Each
// candidate is shown long enough to tell it from the others, and at least
// as long as Digest.Short. found holds distinct digests.
func ambiguous(prefix string, found []objects.Digest, where string) error {
	ds := dedupe(found)
	width := 12
	for i := 1; i < len(ds); i++ {
		a, b := ds[i-1].String(), ds[i].String()
		n := 0
		for n < len(a) && a[n] == b[n] {
			n++
		}
		width = max(width, min(n+1, 64))
	}
	short := make([]string, len(ds))
	for i, d := range ds {
		short[i] = d.String()[:width]
	}
	return errs.New(errs.NotFound, pkg, "ambiguous digest prefix %s matches %d versions in %s: %s; give more digits", prefix, len(ds), where, listSome(short))
}

// listSome joins at most ten items for a message.
func listSome(items []string) string {
	const most = 10
	if len(items) <= most {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:most], ", "), len(items)-most)
}

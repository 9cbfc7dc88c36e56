package names

import (
	"context"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
)

// Resolve turns a version name (NAME, NAME:TAG, NAME@DIGEST, DIGEST,
// NAME~N; see refs.ParseSpec) into a manifest digest of st.
func Resolve(st *store.Store, name string) (objects.Digest, error) {
	spec, err := refs.ParseSpec(name)
	if err != nil {
		return objects.Digest{}, err
	}
	var d objects.Digest
	err = resolveView(st, spec, func(tx *bolt.Tx) error {
		d, err = refs.Resolve(tx, spec, store.ManifestIndex{Tx: tx})
		return err
	})
	return d, err
}

// Load resolves name and reads its manifest.
func Load(st *store.Store, name string) (objects.Digest, *objects.Manifest, error) {
	d, err := Resolve(st, name)
	if err != nil {
		return d, nil, err
	}
	var m *objects.Manifest
	err = st.View(func(tx *bolt.Tx) error {
		m, err = st.Manifest(tx, d)
		return err
	})
	return d, m, err
}

// History is a ref's history, newest first.
func History(st *store.Store, name string) (entries []refs.Entry, err error) {
	err = resolveView(st, refs.Spec{Kind: refs.KindRef, Name: name}, func(tx *bolt.Tx) error {
		entries, err = refs.History(tx, name)
		return err
	})
	return entries, err
}

// Listing is one name as ls shows it: a ref with its tags, or a name that
// has tags only (its ref was removed). Current is nil for those.
type Listing struct {
	Name    string
	Current *objects.Digest
	Tags    []string
	Entries int
	Moved   time.Time
	// LogicalBytes is the size of Current's files; Unreadable says why it
	// is unknown (a manifest that does not read), and ls goes on.
	LogicalBytes int64
	Unreadable   string
}

// List lists every ref and every name with tags, by name.
func List(st *store.Store) ([]Listing, error) {
	out := []Listing{}
	err := st.View(func(tx *bolt.Tx) error {
		list, err := refs.List(tx)
		if err != nil {
			return err
		}
		tags, err := refs.Tags(tx)
		if err != nil {
			return err
		}
		byName := map[string][]string{}
		for _, t := range tags {
			byName[t.Name] = append(byName[t.Name], t.Tag)
		}
		for _, r := range list {
			cur := r.Current
			l := Listing{Name: r.Name, Current: &cur, Tags: append([]string{}, byName[r.Name]...), Entries: r.Entries, Moved: r.Moved}
			l.LogicalBytes, err = logicalBytes(st, tx, cur)
			if err != nil {
				l.Unreadable = err.Error()
			}
			out = append(out, l)
			delete(byName, r.Name)
		}
		for name, tags := range byName {
			out = append(out, Listing{Name: name, Tags: tags})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return nil
	})
	return out, err
}

// Tag makes NAME:TAG name version d, which must still be in the store (gc
// may have removed an unnamed version since it was resolved). created is
// false when the tag named d already.
func Tag(st *store.Store, name, tag string, d objects.Digest) (created bool, err error) {
	err = st.Update(func(tx *bolt.Tx) (err error) {
		if !(store.ManifestIndex{Tx: tx}).HasManifest(d) {
			return errs.New(errs.NotFound, "tag", "version %s is no longer in the store", d.Short())
		}
		created, err = refs.Tag(tx, name, tag, d)
		return err
	})
	return created, err
}

// Remove removes the ref name, or, when isTag, the tag NAME:TAG.
func Remove(st *store.Store, name, tag string, isTag bool) error {
	spec := refs.Spec{Kind: refs.KindRef, Name: name}
	if isTag {
		spec = refs.Spec{Kind: refs.KindTag, Name: name, Tag: tag}
	}
	return st.Update(func(tx *bolt.Tx) error {
		if isTag {
			return withSuggestion(tx, spec, refs.RemoveTag(tx, name, tag))
		}
		return withSuggestion(tx, spec, refs.RemoveRef(tx, name))
	})
}

// Trimmed is what Trim did to one ref.
type Trimmed struct {
	Name    string `json:"name"`
	Removed int    `json:"removed"`
	Kept    int    `json:"kept"`
}

// Trim drops all but the newest keep entries of each ref's history, in one
// transaction: all of them, or none.
func Trim(st *store.Store, names []string, keep int) ([]Trimmed, error) {
	var out []Trimmed
	err := st.Update(func(tx *bolt.Tx) error {
		out = out[:0]
		for _, n := range names {
			removed, err := refs.TrimHistory(tx, n, keep)
			if err != nil {
				return err
			}
			hist, err := refs.History(tx, n)
			if err != nil {
				return err
			}
			out = append(out, Trimmed{Name: n, Removed: removed, Kept: len(hist)})
		}
		return nil
	})
	return out, err
}

// Fsck checks the whole store (store.Fsck) with its names: the refs'
// records, that every name reaches a manifest, and which versions no name
// reaches.
func Fsck(ctx context.Context, st *store.Store, opts store.FsckOptions) (*store.FsckReport, error) {
	opts.Names = refs.Layer{}
	return st.Fsck(ctx, opts)
}

// RebuildIndex builds the store's index again (store.RebuildIndex),
// replaying the journal's ref records.
func RebuildIndex(ctx context.Context, dir string, opts store.Options, workers int) (*store.RebuildReport, error) {
	opts.Names = refs.Layer{}
	return store.RebuildIndex(ctx, dir, opts, workers)
}

package store_test

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/store/storetest"
)

// fixture is a store holding two versions of one ref, a tag, and the
// records of their blobs.
type fixture struct {
	st     *store.Store
	a, b   storetest.Model
	da, db objects.Digest
	recs   map[objects.Digest]store.BlobRecord
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	root := t.TempDir()
	f := &fixture{st: openWith(t, filepath.Join(root, "store"), nil)}
	f.a = storetest.Variant(t, root, "a", 1)
	f.b = storetest.Variant(t, root, "b", 1, 2)
	f.da = storetest.Add(t, f.st, f.a, "m")
	f.db = storetest.Add(t, f.st, f.b, "m")
	f.update(t, func(tx *bolt.Tx) error {
		_, err := refs.Tag(tx, "m", "v1", f.da)
		return err
	})
	f.recs = map[objects.Digest]store.BlobRecord{}
	f.st.View(func(tx *bolt.Tx) error {
		return store.ForEachBlob(tx, func(r store.BlobRecord) error {
			f.recs[r.Digest] = r
			return nil
		})
	})
	return f
}

func (f *fixture) update(t *testing.T, fn func(tx *bolt.Tx) error) {
	t.Helper()
	if err := f.st.Update(fn); err != nil {
		t.Fatal(err)
	}
}

// blob returns a record of the encoding asked for.
func (f *fixture) blob(t *testing.T, enc store.Encoding) store.BlobRecord {
	t.Helper()
	for _, d := range slices.SortedFunc(func(yield func(objects.Digest) bool) {
		for d := range f.recs {
			if !yield(d) {
				return
			}
		}
	}, func(a, b objects.Digest) int { return slices.Compare(a[:], b[:]) }) {
		if r := f.recs[d]; r.Encoding == enc {
			return r
		}
	}
	t.Fatalf("no blob of encoding %d", enc)
	return store.BlobRecord{}
}

// rerecord replaces r's record by the one change makes of it, and
// returns r's digest.
func (f *fixture) rerecord(t *testing.T, r store.BlobRecord, change func(*store.BlobRecord)) string {
	t.Helper()
	f.update(t, func(tx *bolt.Tx) error {
		if err := store.RemoveBlobRecords(tx, []store.RecordPrint{store.PrintOf(r)}); err != nil {
			return err
		}
		change(&r)
		return store.RecordBlobs(tx, []store.BlobRecord{r})
	})
	return r.Digest.String()
}

// flipBit flips one bit of the file at off.
func flipBit(t *testing.T, path string, off int64) {
	t.Helper()
	os.Chmod(path, 0o644)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func ids(fs []store.Finding, kind string) []string {
	var out []string
	for _, f := range fs {
		if f.Kind == kind {
			out = append(out, f.ID)
		}
	}
	return out
}

func TestFsckCleanStore(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := storetest.Fsck(t, f.st, store.FsckOptions{})
	if r.Blobs != len(f.recs) || r.Manifests != 2 || r.Refs != 1 || r.Tags != 1 || r.Packs != 2 {
		t.Errorf("counts: %+v (want %d blobs, 2 manifests, 1 ref, 1 tag, 2 packs)", r, len(f.recs))
	}
	if len(r.Unreferenced)+len(r.Leftovers) != 0 {
		t.Errorf("a clean store has unreferenced %+v, leftovers %+v", r.Unreferenced, r.Leftovers)
	}
}

// Every way for something needed to be lost or damaged is found, named and
// classified as missing or corrupt.
func TestFsckFindsDamage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		damage        func(t *testing.T, f *fixture) string // returns the id to expect
		kind, finding string                                // "missing" or "corrupt"
	}{
		{"bit flip in a loose blob", func(t *testing.T, f *fixture) string {
			r := f.blob(t, store.EncodingRaw)
			flipBit(t, f.st.BlobPath(r.Digest), r.Size/2)
			return r.Digest.String()
		}, "blob", "corrupt"},
		{"bit flip in a packed blob", func(t *testing.T, f *fixture) string {
			r := f.blob(t, store.EncodingPacked)
			flipBit(t, f.st.PackPath(r.Pack), r.Offset+r.Size-1)
			return r.Digest.String()
		}, "blob", "corrupt"},
		{"bit flip in a small packed blob", func(t *testing.T, f *fixture) string {
			// Hashed eight at a time with its neighbours (objects.SumSmall).
			var small []store.BlobRecord
			for _, r := range f.recs {
				if r.Encoding == store.EncodingPacked && r.Size <= objects.SmallMax && r.Size > 0 {
					small = append(small, r)
				}
			}
			if len(small) < 2 {
				t.Fatalf("%d small packed blobs in the fixture", len(small))
			}
			slices.SortFunc(small, func(a, b store.BlobRecord) int { return slices.Compare(a.Digest[:], b.Digest[:]) })
			r := small[len(small)/2]
			flipBit(t, f.st.PackPath(r.Pack), r.Offset)
			return r.Digest.String()
		}, "blob", "corrupt"},
		{"loose blob truncated", func(t *testing.T, f *fixture) string {
			r := f.blob(t, store.EncodingRaw)
			os.Truncate(f.st.BlobPath(r.Digest), r.Size-1)
			return r.Digest.String()
		}, "blob", "corrupt"},
		{"pack truncated", func(t *testing.T, f *fixture) string {
			var last store.BlobRecord
			p := f.blob(t, store.EncodingPacked).Pack
			for _, r := range f.recs {
				if r.Encoding == store.EncodingPacked && r.Pack == p && r.Offset >= last.Offset {
					last = r
				}
			}
			os.Truncate(f.st.PackPath(p), last.Offset+1)
			return last.Digest.String()
		}, "blob", "corrupt"},
		{"packed blob recorded past its pack's end", func(t *testing.T, f *fixture) string {
			return f.rerecord(t, f.blob(t, store.EncodingPacked), func(r *store.BlobRecord) { r.Offset += 1 << 40 })
		}, "blob", "corrupt"},
		{"packed blob recorded where offset and size overflow", func(t *testing.T, f *fixture) string {
			return f.rerecord(t, f.blob(t, store.EncodingPacked), func(r *store.BlobRecord) { r.Offset = math.MaxInt64 - r.Size/2 })
		}, "blob", "corrupt"},
		{"loose blob deleted", func(t *testing.T, f *fixture) string {
			r := f.blob(t, store.EncodingRaw)
			os.Remove(f.st.BlobPath(r.Digest))
			return r.Digest.String()
		}, "blob", "missing"},
		{"pack deleted", func(t *testing.T, f *fixture) string {
			r := f.blob(t, store.EncodingPacked)
			os.Remove(f.st.PackPath(r.Pack))
			return r.Digest.String()
		}, "blob", "missing"},
		{"blob record removed", func(t *testing.T, f *fixture) string {
			r := f.blob(t, store.EncodingPacked)
			f.update(t, func(tx *bolt.Tx) error { return store.RemoveBlobRecords(tx, []store.RecordPrint{store.PrintOf(r)}) })
			return r.Digest.String()
		}, "blob", "missing"},
		{"manifest a ref names removed", func(t *testing.T, f *fixture) string {
			f.update(t, func(tx *bolt.Tx) error { return store.RemoveManifest(tx, f.db) })
			return f.db.String()
		}, "manifest", "missing"},
		{"manifest an old history entry names removed", func(t *testing.T, f *fixture) string {
			f.update(t, func(tx *bolt.Tx) error {
				if err := refs.RemoveTag(tx, "m", "v1"); err != nil {
					return err
				}
				return store.RemoveManifest(tx, f.da)
			})
			return f.da.String()
		}, "manifest", "missing"},
		{"tag naming an unknown version", func(t *testing.T, f *fixture) string {
			d := objects.Sum([]byte("nothing"))
			f.update(t, func(tx *bolt.Tx) error {
				_, err := refs.Tag(tx, "other", "x", d)
				return err
			})
			return d.String()
		}, "manifest", "missing"},
		{"manifest bytes that do not match their digest", func(t *testing.T, f *fixture) string {
			d := objects.Sum([]byte("a manifest"))
			f.update(t, func(tx *bolt.Tx) error { return store.PutManifest(tx, d, []byte("not a manifest")) })
			return d.String()
		}, "manifest", "corrupt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			want := tc.damage(t, f)
			r, err := names.Fsck(t.Context(), f.st, store.FsckOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if r.OK {
				t.Fatalf("fsck calls a damaged store ok: %+v", r)
			}
			got := r.Missing
			if tc.finding == "corrupt" {
				got = r.Corrupt
			}
			if !slices.Contains(ids(got, tc.kind), want) {
				t.Fatalf("%s %s %s not reported: missing %+v, corrupt %+v", tc.finding, tc.kind, want, r.Missing, r.Corrupt)
			}
		})
	}
}

// Leftovers of crashed commands and versions no name keeps are reported but
// are not errors; --repair removes the leftovers mstore wrote and nothing
// else.
func TestFsckLeftoversAndRepair(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	dir := f.st.Dir()
	orphan := []byte("an orphan blob")
	od := objects.Sum(orphan)
	write := func(rel string, b []byte) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	write("tmp/pack-0123.3456", []byte("half a pack"))
	write("objects/"+od.String()[:2]+"/"+od.String(), orphan)
	write("objects/packs/00112233445566778899aabbccddeeff.pack", []byte("a pack nobody records"))
	write("objects/README", []byte("not ours"))
	f.update(t, func(tx *bolt.Tx) error { return refs.RemoveRef(tx, "m") })

	r := storetest.Fsck(t, f.st, store.FsckOptions{})
	kinds := map[string]int{}
	for _, l := range r.Leftovers {
		kinds[l.Kind]++
	}
	if kinds["temp"] != 1 || kinds["blob"] != 1 || kinds["pack"] != 1 || kinds["unknown"] != 1 {
		t.Errorf("leftovers %+v", r.Leftovers)
	}
	// The tag keeps the first version; the second is unreferenced.
	if got := ids(r.Unreferenced, "manifest"); !slices.Equal(got, []string{f.db.String()}) {
		t.Errorf("unreferenced manifests %v, want %s", got, f.db.Short())
	}

	r = storetest.Fsck(t, f.st, store.FsckOptions{Repair: true})
	if len(r.Repaired) != 3 {
		t.Errorf("repaired %+v, want the temp file, the orphan blob and the orphan pack", r.Repaired)
	}
	r = storetest.Fsck(t, f.st, store.FsckOptions{})
	if len(r.Leftovers) != 1 || r.Leftovers[0].Kind != "unknown" {
		t.Errorf("after repair: leftovers %+v, want only the unknown file", r.Leftovers)
	}
	if len(r.Unreferenced) == 0 {
		t.Error("repair removed unreferenced data: that is gc's job")
	}
	storetest.RequireCheckout(t, f.st, "m:v1", f.a)
	if _, err := storetest.Checkout(f.st, f.db); err != nil {
		t.Errorf("repair removed data of an unreferenced version: %v", err)
	}
}

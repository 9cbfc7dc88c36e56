package gc_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/gc"
	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/store/storetest"
)

// storeModel is what the store should hold: each ref's history and each
// tag as indexes into the variants, and which versions may still be in the
// store (everything added since the last gc, and what that gc kept).
type storeModel struct {
	history map[string][]int
	tags    map[string]int // "NAME:TAG"
	retired map[string]int
	present map[int]bool
}

func (m *storeModel) named() map[int]bool {
	out := map[int]bool{}
	for _, h := range m.history {
		for _, v := range h {
			out[v] = true
		}
	}
	for _, v := range m.tags {
		out[v] = true
	}
	return out
}

// TestStoreAgainstModel drives random adds, tags, removals, trims, gcs and
// checkouts against a store and an in-memory model of it. After every step
// every name the model holds checks out byte for byte, fsck finds nothing
// missing or corrupt, and after a gc exactly the named versions remain.
func TestStoreAgainstModel(t *testing.T) {
	setRapidChecks(t, 25, 1000)
	root := t.TempDir()
	variants := []storetest.Model{
		storetest.Variant(t, root, "v0", 1),
		storetest.Variant(t, root, "v1", 1, 2),
		storetest.Variant(t, root, "v2", 2, 3),
		storetest.Variant(t, root, "v3", 3),
	}
	digests := make([]objects.Digest, len(variants))
	refNames := []string{"a", "b/c"}
	tagNames := []string{"t1", "t2"}
	run := 0

	rapid.Check(t, func(rt *rapid.T) {
		run++
		st, err := store.Open(filepath.Join(root, fmt.Sprintf("store%d", run)), true,
			store.Options{LockTimeout: 5 * time.Second, FS: storetest.NoSyncFS{}})
		if err != nil {
			rt.Fatal(err)
		}
		m := &storeModel{history: map[string][]int{}, tags: map[string]int{}, retired: map[string]int{}, present: map[int]bool{}}
		wantErr := func(err error, class errs.Class, what string) {
			rt.Helper()
			if class == 0 && err != nil || class != 0 && !errors.Is(err, class) {
				rt.Fatalf("%s: got %v, want %v", what, err, class.Key())
			}
		}
		// tagFree says whether NAME:TAG may be created at variant v.
		tagFree := func(k string, v int) bool {
			if old, ok := m.tags[k]; ok {
				return old == v
			}
			if old, ok := m.retired[k]; ok {
				return old == v
			}
			return true
		}
		setTag := func(k string, v int) {
			m.tags[k] = v
			delete(m.retired, k)
		}

		rt.Repeat(map[string]func(*rapid.T){
			"add": func(rt *rapid.T) {
				v := rapid.IntRange(0, len(variants)-1).Draw(rt, "variant")
				name := rapid.SampledFrom(refNames).Draw(rt, "name")
				tag := rapid.SampledFrom(append([]string{""}, tagNames...)).Draw(rt, "tag")
				res, err := archiver.Add(context.Background(), st, variants[v].Dir, archiver.Options{Name: name, Tag: tag})
				if tag != "" && !tagFree(name+":"+tag, v) {
					wantErr(err, errs.Conflict, "add with a taken tag")
					return
				}
				wantErr(err, 0, "add")
				if digests[v].IsZero() {
					digests[v] = res.Digest
				} else if digests[v] != res.Digest {
					rt.Fatalf("variant %d added as %s, before as %s", v, res.Digest.Short(), digests[v].Short())
				}
				if h := m.history[name]; len(h) == 0 || h[len(h)-1] != v {
					m.history[name] = append(h, v)
				}
				if tag != "" {
					setTag(name+":"+tag, v)
				}
				m.present[v] = true
			},
			"tag": func(rt *rapid.T) {
				name := rapid.SampledFrom(refNames).Draw(rt, "name")
				h := m.history[name]
				if len(h) == 0 {
					rt.Skip("no ref to tag") // choice: rapid discards this drawn action
				}
				back := rapid.IntRange(0, len(h)-1).Draw(rt, "back")
				v := h[len(h)-1-back]
				k := name + ":" + rapid.SampledFrom(tagNames).Draw(rt, "tag")
				n, t, _ := cut(k)
				err := st.Update(func(tx *bolt.Tx) error {
					_, err := refs.Tag(tx, n, t, digests[v])
					return err
				})
				if !tagFree(k, v) {
					wantErr(err, errs.Conflict, "moving a tag")
					return
				}
				wantErr(err, 0, "tag")
				setTag(k, v)
			},
			"rm ref": func(rt *rapid.T) {
				name := rapid.SampledFrom(refNames).Draw(rt, "name")
				err := st.Update(func(tx *bolt.Tx) error { return refs.RemoveRef(tx, name) })
				if _, ok := m.history[name]; !ok {
					wantErr(err, errs.NotFound, "rm of a missing ref")
					return
				}
				wantErr(err, 0, "rm ref")
				delete(m.history, name)
			},
			"rm tag": func(rt *rapid.T) {
				k := rapid.SampledFrom(refNames).Draw(rt, "name") + ":" + rapid.SampledFrom(tagNames).Draw(rt, "tag")
				n, t, _ := cut(k)
				err := st.Update(func(tx *bolt.Tx) error { return refs.RemoveTag(tx, n, t) })
				v, ok := m.tags[k]
				if !ok {
					wantErr(err, errs.NotFound, "rm of a missing tag")
					return
				}
				wantErr(err, 0, "rm tag")
				delete(m.tags, k)
				m.retired[k] = v
			},
			"trim": func(rt *rapid.T) {
				name := rapid.SampledFrom(refNames).Draw(rt, "name")
				keep := rapid.IntRange(1, 3).Draw(rt, "keep")
				err := st.Update(func(tx *bolt.Tx) error {
					_, err := refs.TrimHistory(tx, name, keep)
					return err
				})
				h, ok := m.history[name]
				if !ok {
					wantErr(err, errs.NotFound, "trim of a missing ref")
					return
				}
				wantErr(err, 0, "trim")
				m.history[name] = h[max(len(h)-keep, 0):]
			},
			"gc": func(rt *rapid.T) {
				// A budget of a few digests makes the plan spill what versions
				// need to runs at almost every manifest.
				opts := noGrace
				opts.LiveBudget = rapid.SampledFrom([]int{0, 64, 1024}).Draw(rt, "live budget")
				_, _, err := gc.Run(context.Background(), st, opts)
				wantErr(err, 0, "gc")
				m.present = m.named()
				r := storetest.Fsck(rt, st, store.FsckOptions{})
				if len(r.Unreferenced) != 0 || len(r.Leftovers) != 0 {
					rt.Fatalf("after gc: unreferenced %+v, leftovers %+v", r.Unreferenced, r.Leftovers)
				}
				for v := range variants {
					if digests[v].IsZero() || m.present[v] {
						continue
					}
					if _, err := storetest.Checkout(st, digests[v]); !errors.Is(err, errs.NotFound) {
						rt.Fatalf("variant %d is named by nothing, yet after gc: %v", v, err)
					}
				}
			},
			"checkout": func(rt *rapid.T) {
				var specs []string
				want := map[string]int{}
				for _, name := range slices.Sorted(maps.Keys(m.history)) {
					h := m.history[name]
					for back := range h {
						s := fmt.Sprintf("%s~%d", name, back)
						specs = append(specs, s)
						want[s] = h[len(h)-1-back]
					}
				}
				for _, k := range slices.Sorted(maps.Keys(m.tags)) {
					specs = append(specs, k)
					want[k] = m.tags[k]
				}
				for v := range m.present {
					s := digests[v].String()
					specs = append(specs, s)
					want[s] = v
				}
				if len(specs) == 0 {
					rt.Skip("nothing to check out") // choice: rapid discards this drawn action
				}
				slices.Sort(specs)
				s := rapid.SampledFrom(specs).Draw(rt, "spec")
				d, err := names.Resolve(st, s)
				wantErr(err, 0, "resolve "+s)
				got, err := storetest.Checkout(st, d)
				wantErr(err, 0, "checkout "+s)
				if !storetest.SameFiles(got, variants[want[s]].Files) {
					rt.Fatalf("checkout %s is not variant %d", s, want[s])
				}
			},
			"": func(rt *rapid.T) {
				r, err := names.Fsck(context.Background(), st, store.FsckOptions{})
				if err != nil || !r.OK {
					rt.Fatalf("fsck: %v, missing %+v, corrupt %+v", err, r.Missing, r.Corrupt)
				}
			},
		})
	})
}

// setRapidChecks runs normal checks (each adds and checks out models), or
// soak checks with MSTORE_SOAK=1, unless -rapid.checks says otherwise.
func setRapidChecks(t *testing.T, normal, soak int) {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if set || os.Getenv("RAPID_CHECKS") != "" {
		return
	}
	n := normal
	if os.Getenv("MSTORE_SOAK") != "" {
		n = soak
	}
	f := flag.Lookup("rapid.checks")
	old := f.Value.String()
	f.Value.Set(strconv.Itoa(n))
	t.Cleanup(func() { f.Value.Set(old) })
}

func cut(k string) (name, tag string, ok bool) {
	for i := len(k) - 1; i >= 0; i-- {
		if k[i] == ':' {
			return k[:i], k[i+1:], true
		}
	}
	return k, "", false
}

package repack_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/gc"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/repack"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/store/storetest"
)

// TestRepackGCAgainstModel drives random adds (a base, fine-tunes of it,
// an unrelated model), ref removals, repacks and gcs. After every step
// every named version checks out bit for bit, fsck finds nothing missing
// or corrupt, and every delta's base is recorded and is not a delta.
func TestRepackGCAgainstModel(t *testing.T) {
	// Each check adds, repacks and checks out several models: a few
	// unless -rapid.checks says otherwise (MSTORE_SOAK=1: many).
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == "100" {
		n := "3"
		if os.Getenv("MSTORE_SOAK") != "" {
			n = "100"
		}
		f.Value.Set(n)
		t.Cleanup(func() { f.Value.Set("100") })
	}
	root := t.TempDir()
	variants := []storetest.Model{
		model(t, root, "base", 0),
		model(t, root, "ft1", 21),
		model(t, root, "ft2", 22),
		seededModel(t, root, "other", 9, 0),
	}
	names := []string{"a", "b", "c"}
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		st, err := store.Open(filepath.Join(root, fmt.Sprintf("store%d", run)), true, store.Options{LockTimeout: 5 * time.Second, FS: storetest.NoSyncFS{}})
		if err != nil {
			rt.Fatal(err)
		}
		history := map[string][]int{}
		digests := map[int]objects.Digest{}
		check := func(rt *rapid.T) {
			for _, h := range history {
				for _, v := range h {
					got, err := storetest.Checkout(st, digests[v])
					if err != nil {
						rt.Fatalf("checkout of variant %d: %v", v, err)
					}
					for p, want := range variants[v].Files {
						if string(got[p]) != string(want) {
							rt.Fatalf("variant %d: %s differs", v, p)
						}
					}
				}
			}
			r, err := st.Fsck(context.Background(), store.FsckOptions{})
			if err != nil || !r.OK {
				rt.Fatalf("fsck: %v missing=%v corrupt=%v", err, r.Missing, r.Corrupt)
			}
			st.View(func(tx *bolt.Tx) error {
				return store.ForEachBlob(tx, func(r store.BlobRecord) error {
					if r.Coding == store.CodingDelta && (r.BaseRec == nil || r.BaseRec.Coding == store.CodingDelta) {
						rt.Fatalf("delta %s: base %s missing or a delta", r.Digest.Short(), r.Base.Short())
					}
					return nil
				})
			})
		}
		rt.Repeat(map[string]func(*rapid.T){
			"add": func(rt *rapid.T) {
				v := rapid.IntRange(0, len(variants)-1).Draw(rt, "variant")
				name := rapid.SampledFrom(names).Draw(rt, "name")
				res, err := archiver.Add(context.Background(), st, variants[v].Dir, archiver.Options{Name: name})
				if err != nil {
					rt.Fatalf("add: %v", err)
				}
				digests[v] = res.Digest
				if h := history[name]; len(h) == 0 || h[len(h)-1] != v {
					history[name] = append(h, v)
				}
			},
			"rm": func(rt *rapid.T) {
				name := rapid.SampledFrom(names).Draw(rt, "name")
				if len(history[name]) == 0 {
					rt.Skip("no such ref") // choice: rapid discards this draw
				}
				if err := st.Update(func(tx *bolt.Tx) error { return refs.RemoveRef(tx, name) }); err != nil {
					rt.Fatal(err)
				}
				delete(history, name)
			},
			"repack": func(rt *rapid.T) {
				if _, _, err := repack.Run(context.Background(), st, repack.Options{}); err != nil {
					rt.Fatalf("repack: %v", err)
				}
			},
			"gc": func(rt *rapid.T) {
				// A budget of a few digests makes the plan spill what versions
				// need to runs at almost every manifest.
				budget := rapid.SampledFrom([]int{0, 64, 1024}).Draw(rt, "live budget")
				if _, _, err := gc.Run(context.Background(), st, gc.Options{Grace: -1, LockWait: time.Second, LiveBudget: budget}); err != nil {
					rt.Fatalf("gc: %v", err)
				}
			},
			"": check,
		})
	})
}

package gc_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/gc"
	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/store/storetest"
)

// noGrace deletes unrecorded files of any age.
var noGrace = gc.Options{Grace: -1, LockWait: time.Second}

// fixture: ref m moved through a, b, c (sharing tensors), a tag x:v1 at d
// whose ref x was removed, and a removed ref y at e.
type fixture struct {
	st            *store.Store
	a, b, c, d, e storetest.Model
	digests       map[string]objects.Digest
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	root := t.TempDir()
	st, err := store.Open(filepath.Join(root, "store"), true, store.Options{LockTimeout: 5 * time.Second, FS: storetest.NoSyncFS{}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, digests: map[string]objects.Digest{}}
	f.a = storetest.Variant(t, root, "a", 1)
	f.b = storetest.Variant(t, root, "b", 1, 2)
	f.c = storetest.Variant(t, root, "c", 1, 2, 3)
	f.d = storetest.Variant(t, root, "d", 4, 1)
	f.e = storetest.Variant(t, root, "e", 5, 2)
	for _, v := range []struct {
		key, ref string
		m        storetest.Model
	}{{"a", "m", f.a}, {"b", "m", f.b}, {"c", "m", f.c}, {"d", "x", f.d}, {"e", "y", f.e}} {
		f.digests[v.key] = storetest.Add(t, st, v.m, v.ref)
	}
	f.update(t, func(tx *bolt.Tx) error {
		if _, err := refs.Tag(tx, "x", "v1", f.digests["d"]); err != nil {
			return err
		}
		if err := refs.RemoveRef(tx, "x"); err != nil {
			return err
		}
		return refs.RemoveRef(tx, "y")
	})
	return f
}

// trimM keeps the newest entry of m's history only: a and b are then named
// by nothing, and their packs, shared with c, are repacked.
func (f *fixture) trimM(t *testing.T) {
	t.Helper()
	f.update(t, func(tx *bolt.Tx) error {
		_, err := refs.TrimHistory(tx, "m", 1)
		return err
	})
}

func (f *fixture) update(t *testing.T, fn func(tx *bolt.Tx) error) {
	t.Helper()
	if err := f.st.Update(fn); err != nil {
		t.Fatal(err)
	}
}

// requireNamed fails unless every named version checks out whole.
func (f *fixture) requireNamed(t *testing.T, withHistory bool) {
	t.Helper()
	storetest.RequireCheckout(t, f.st, "m", f.c)
	storetest.RequireCheckout(t, f.st, "x:v1", f.d)
	if withHistory {
		storetest.RequireCheckout(t, f.st, "m~1", f.b)
		storetest.RequireCheckout(t, f.st, "m~2", f.a)
	}
}

func (f *fixture) gone(t *testing.T, key string) {
	t.Helper()
	if _, err := storetest.Checkout(f.st, f.digests[key]); !errors.Is(err, errs.NotFound) {
		t.Errorf("version %s after gc: err = %v, want not_found", key, err)
	}
}

// files lists the files under objects/ and tmp/.
func files(t *testing.T, st *store.Store) []string {
	t.Helper()
	var out []string
	if err := st.WalkFiles(func(f store.StoredFile) error { out = append(out, f.Rel); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// requireTidy fails unless fsck finds nothing to free and no leftovers.
func requireTidy(t *testing.T, st *store.Store) {
	t.Helper()
	r := storetest.Fsck(t, st, store.FsckOptions{})
	if len(r.Unreferenced) != 0 || len(r.Leftovers) != 0 {
		t.Fatalf("after gc: unreferenced %+v, leftovers %+v", r.Unreferenced, r.Leftovers)
	}
}

func TestGCKeepsEveryNamedVersionAndFreesTheRest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	plan, res, err := gc.Run(context.Background(), f.st, noGrace)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plan.RemoveManifests, []objects.Digest{f.digests["e"]}) || res.RemovedManifests != 1 {
		t.Errorf("removed %v, want only e %s", plan.RemoveManifests, f.digests["e"].Short())
	}
	if res.FreedBlobs == 0 || res.FreedBytes == 0 {
		t.Errorf("freed nothing: %+v", res)
	}
	f.requireNamed(t, true)
	f.gone(t, "e")
	requireTidy(t, f.st)

	// A second gc has nothing to do.
	plan, res, err = gc.Run(context.Background(), f.st, noGrace)
	if err != nil || res.FreedBlobs != 0 || res.DeletedFiles != 0 || len(plan.Repacks) != 0 {
		t.Fatalf("second gc: %+v, %+v, %v", plan, res, err)
	}
}

// A plan that holds what versions need in memory and one that spills it
// to runs at almost every manifest decide the same: what is removed, kept,
// repacked and missing (after a trim, which leaves packs to repack). The
// runs leave no file behind.
func TestGCPlanIsTheSameWhenItSpills(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.trimM(t)
	before := files(t, f.st)
	dry := noGrace
	dry.DryRun = true
	var plans []string
	for _, budget := range []int{0, 32, 96, 4096} {
		dry.LiveBudget = budget
		plan, _, err := gc.Run(context.Background(), f.st, dry)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(plan)
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, string(b))
		if len(plan.Repacks) == 0 || plan.FreedBlobs == 0 {
			t.Fatalf("budget %d: %d repacks, %d blobs freed; the fixture must give both", budget, len(plan.Repacks), plan.FreedBlobs)
		}
	}
	for i, p := range plans[1:] {
		if p != plans[0] {
			t.Fatalf("the plan with budget %d differs from the one in memory:\n%s\n%s", []int{32, 96, 4096}[i], p, plans[0])
		}
	}
	if after := files(t, f.st); !slices.Equal(after, before) {
		t.Fatalf("files after the plans %v, before %v", after, before)
	}
}

// Trimming a ref's history lets gc free the versions only the dropped
// entries named, and repack the packs they shared with kept versions.
func TestGCAfterTrimRepacks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.trimM(t)
	plan, res, err := gc.Run(context.Background(), f.st, noGrace)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.RemoveManifests) != 3 { // a, b and e
		t.Errorf("removed %d versions, want 3", len(plan.RemoveManifests))
	}
	if len(plan.Repacks) == 0 || res.RepackedPacks != len(plan.Repacks) {
		t.Errorf("no pack repacked: a's and b's packs hold blobs c and d still need: %+v", plan.Repacks)
	}
	f.requireNamed(t, false)
	for _, k := range []string{"a", "b", "e"} {
		f.gone(t, k)
	}
	requireTidy(t, f.st)
}

func TestGCDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.trimM(t)
	before := files(t, f.st)
	opts := noGrace
	opts.DryRun = true
	plan, res, err := gc.Run(context.Background(), f.st, opts)
	if err != nil || res != nil {
		t.Fatalf("dry run: %v, %+v", err, res)
	}
	if len(plan.RemoveManifests) != 3 || len(plan.Repacks) == 0 || plan.FreedBytes == 0 {
		t.Errorf("plan %+v", plan)
	}
	if after := files(t, f.st); !slices.Equal(before, after) {
		t.Fatalf("a dry run changed the files: %v → %v", before, after)
	}
	f.requireNamed(t, false)
	for _, k := range []string{"a", "b", "e"} {
		if _, err := storetest.Checkout(f.st, f.digests[k]); err != nil {
			t.Errorf("a dry run removed version %s: %v", k, err)
		}
	}
}

// Files the index does not record are deleted only once older than the
// grace period.
func TestGCGracePeriod(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	orphan := []byte("a blob of a crashed add")
	od := objects.Sum(orphan).String()
	for rel, b := range map[string][]byte{
		"tmp/pack-abc.123":                                    []byte("half a pack"),
		"objects/" + od[:2] + "/" + od:                        orphan,
		"objects/packs/00112233445566778899aabbccddeeff.pack": []byte("a pack of a crashed add"),
	} {
		p := filepath.Join(f.st.Dir(), filepath.FromSlash(rel))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	plan, _, err := gc.Run(context.Background(), f.st, gc.Options{LockWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Orphans) != 0 || len(plan.KeptOrphans) != 3 {
		t.Fatalf("fresh orphans: deleted %+v, kept %+v; want 3 kept", plan.Orphans, plan.KeptOrphans)
	}
	later := func() time.Time { return time.Now().Add(gc.DefaultGrace + time.Minute) }
	plan, _, err = gc.Run(context.Background(), f.st, gc.Options{LockWait: time.Second, Now: later})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Orphans) != 3 || len(plan.KeptOrphans) != 0 {
		t.Fatalf("old orphans: deleted %+v, kept %+v; want 3 deleted", plan.Orphans, plan.KeptOrphans)
	}
	f.requireNamed(t, true)
	requireTidy(t, f.st)
}

// gc waits for adds and checkouts (the shared lock), and gives up with a
// conflict when they do not finish in time.
func TestGCWaitsForSharedLock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	lock, err := f.st.Lock(store.LockShared, 0)
	if err != nil {
		t.Fatal(err)
	}
	before := files(t, f.st)
	_, _, err = gc.Run(context.Background(), f.st, gc.Options{Grace: -1, LockWait: 50 * time.Millisecond})
	if !errors.Is(err, errs.Conflict) {
		t.Fatalf("gc while an add holds the lock: err = %v, want conflict", err)
	}
	if after := files(t, f.st); !slices.Equal(before, after) {
		t.Fatal("gc changed files without the lock")
	}
	go func() {
		time.Sleep(30 * time.Millisecond)
		lock.Unlock()
	}()
	if _, _, err := gc.Run(context.Background(), f.st, gc.Options{Grace: -1, LockWait: 5 * time.Second}); err != nil {
		t.Fatalf("gc after the add finished: %v", err)
	}
}

// A version named again (by a tag) between the plan and its execution is
// not removed: the execution gives up with a conflict and changes nothing.
func TestGCConflictWhenAVersionIsNamedMeanwhile(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	lock, err := f.st.Lock(store.LockExclusive, 0)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := gc.NewPlan(context.Background(), f.st, noGrace)
	if err != nil {
		t.Fatal(err)
	}
	f.update(t, func(tx *bolt.Tx) error {
		_, err := refs.Tag(tx, "y", "saved", f.digests["e"])
		return err
	})
	before := files(t, f.st)
	if _, err := plan.Execute(context.Background(), f.st); !errors.Is(err, errs.Conflict) {
		t.Fatalf("execute after a tag named a removed version: err = %v, want conflict", err)
	}
	if after := files(t, f.st); !slices.Equal(before, after) {
		t.Fatalf("files changed: %v → %v", before, after)
	}
	lock.Unlock()
	storetest.RequireCheckout(t, f.st, "y:saved", f.e)
}

// A live blob that fails its digest while gc repacks stops gc before it
// changes anything: a gc never drops or copies damaged data silently.
func TestGCStopsAtACorruptLiveBlob(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.trimM(t)
	lock, err := f.st.Lock(store.LockExclusive, 0)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := gc.NewPlan(context.Background(), f.st, noGrace)
	lock.Unlock()
	if err != nil || len(plan.Repacks) == 0 {
		t.Fatalf("plan: %v, %+v", err, plan)
	}
	pack := filepath.Join(f.st.Dir(), plan.Repacks[0].Path)
	b, _ := os.ReadFile(pack)
	os.Chmod(pack, 0o644)
	for i := range b {
		b[i] ^= 0x01 // damage every blob of the pack
	}
	os.WriteFile(pack, b, 0o444)
	before := files(t, f.st)
	_, _, err = gc.Run(context.Background(), f.st, noGrace)
	if !errors.Is(err, errs.IntegrityError) {
		t.Fatalf("gc over a corrupt live blob: err = %v, want integrity_error", err)
	}
	if after := files(t, f.st); !slices.Equal(before, after) {
		t.Fatalf("files changed: %v → %v", before, after)
	}
	if r, _ := names.Fsck(context.Background(), f.st, store.FsckOptions{}); r.OK {
		t.Fatal("fsck does not see the damage")
	}
}

// A blob a named version needs that is gone is reported (integrity_error)
// after gc has done the rest of its work: nothing gc frees could bring it
// back, and the rest of the store still deserves its gc.
func TestGCReportsMissingLiveBlobs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d, err := names.Resolve(f.st, "m")
	if err != nil {
		t.Fatal(err)
	}
	var lost store.BlobRecord
	f.st.View(func(tx *bolt.Tx) error {
		m, err := f.st.Manifest(tx, d)
		if err != nil {
			return err
		}
		recs, err := store.LookupRecords(tx, m.Blobs())
		for _, r := range recs {
			if r.Encoding == store.EncodingRaw {
				lost = r
			}
		}
		return err
	})
	if err := os.Remove(f.st.BlobPath(lost.Digest)); err != nil {
		t.Fatal(err)
	}
	plan, res, err := gc.Run(context.Background(), f.st, noGrace)
	if !errors.Is(err, errs.IntegrityError) {
		t.Fatalf("gc with a live blob missing: err = %v, want integrity_error", err)
	}
	if !slices.Contains(plan.Missing, lost.Digest) || res == nil || res.RemovedManifests != 1 {
		t.Fatalf("plan missing %v, result %+v", plan.Missing, res)
	}
	storetest.RequireCheckout(t, f.st, "x:v1", f.d)
}

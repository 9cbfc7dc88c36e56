package gc_test

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/gc"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/store/storetest"
	"github.com/mstore/mstore/internal/testmodel"
)

// TestPlanMemoryPerBlob: a plan holds the digests the named versions need,
// not every blob record. Three versions of 30,000 new small blobs each are
// planned (a dry run, everything live): what the plan allocates beyond
// reading the three manifests stays under 200 bytes a blob (142 when this
// was written). Every record in a map, and every live packed one again in
// its pack's list, took 1,423.
func TestPlanMemoryPerBlob(t *testing.T) {
	root := t.TempDir()
	st, err := store.Open(filepath.Join(root, "store"), true, store.Options{LockTimeout: 5 * time.Second, FS: storetest.NoSyncFS{}})
	if err != nil {
		t.Fatal(err)
	}
	const versions, tensors = 3, 30_000
	var digests []objects.Digest
	for v := range versions {
		dir := filepath.Join(root, "m", string(rune('a'+v)))
		if err := testmodel.WriteTensors(dir, testmodel.ManySmall(tensors, 64), 0, uint64(v+1)); err != nil {
			t.Fatal(err)
		}
		digests = append(digests, storetest.Add(t, st, storetest.Model{Dir: dir}, string(rune('a'+v))))
	}
	allocated := func(fn func()) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		fn()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	reading := allocated(func() {
		err := st.View(func(tx *bolt.Tx) error {
			for _, d := range digests {
				if _, err := st.Manifest(tx, d); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	var plan *gc.Plan
	planning := allocated(func() {
		plan, _, err = gc.Run(context.Background(), st, gc.Options{DryRun: true, LockWait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
	})
	if plan.LiveBlobs < versions*tensors || plan.FreedBlobs != 0 {
		t.Fatalf("plan: %d live blobs, %d freed; want all %d live", plan.LiveBlobs, plan.FreedBlobs, versions*tensors)
	}
	perBlob := float64(planning-min(reading, planning)) / float64(plan.LiveBlobs)
	t.Logf("planning allocated %d bytes, reading the manifests %d: %.0f bytes a blob beyond", planning, reading, perBlob)
	if perBlob > 200 {
		t.Errorf("a plan of %d blobs allocated %.0f bytes a blob beyond reading its manifests, want 200 at most", plan.LiveBlobs, perBlob)
	}
}

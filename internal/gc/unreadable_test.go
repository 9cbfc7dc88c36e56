package gc_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/gc"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
)

// A named version whose manifest does not decode stops nothing, but gc
// cannot tell which blobs it needs: it removes the versions no name reaches,
// deletes no blob record and no blob file, and fails naming the version.
func TestGCKeepsEveryBlobWhileAVersionIsUnreadable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	bad := []byte(`{"schema":1,"tensors":7}`)
	d := objects.Sum(bad)
	f.update(t, func(tx *bolt.Tx) error {
		if err := store.PutManifest(tx, d, bad); err != nil {
			return err
		}
		_, err := refs.Move(tx, "broken", d, "", time.Now())
		return err
	})
	before := files(t, f.st)
	var recsBefore int
	f.st.View(func(tx *bolt.Tx) error {
		return store.ForEachBlob(tx, func(store.BlobRecord) error { recsBefore++; return nil })
	})

	plan, res, err := gc.Run(context.Background(), f.st, noGrace)
	if !errors.Is(err, errs.IntegrityError) || !strings.Contains(err.Error(), d.String()) {
		t.Fatalf("gc: %v, want an integrity_error naming %s", err, d.Short())
	}
	if !plan.KeptAllBlobs || len(plan.Unreadable) != 1 || plan.Unreadable[0].Version != d || plan.FreedBlobs != 0 || len(plan.DeleteFiles) != 0 {
		t.Fatalf("plan: %+v", plan)
	}
	if res == nil || res.RemovedManifests == 0 {
		t.Fatalf("gc did not go on with the versions no name reaches: %+v", res)
	}
	if after := files(t, f.st); !slices.Equal(after, before) {
		t.Errorf("gc deleted files while a version it cannot read is named:\nbefore %v\nafter  %v", before, after)
	}
	var recsAfter int
	f.st.View(func(tx *bolt.Tx) error {
		return store.ForEachBlob(tx, func(store.BlobRecord) error { recsAfter++; return nil })
	})
	if recsAfter != recsBefore {
		t.Errorf("gc removed %d blob records", recsBefore-recsAfter)
	}
	f.gone(t, "e")
	f.requireNamed(t, true)

	// With the unreadable version unnamed, gc frees what it could not.
	f.update(t, func(tx *bolt.Tx) error { return refs.RemoveRef(tx, "broken") })
	if _, _, err := gc.Run(context.Background(), f.st, noGrace); err != nil {
		t.Fatal(err)
	}
	requireTidy(t, f.st)
	f.requireNamed(t, true)
}

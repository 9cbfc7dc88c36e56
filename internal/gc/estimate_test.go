package gc_test

import (
	"context"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/gc"
	"github.com/mstore/mstore/internal/refs"
)

// TestEstimateIsWhatGCFrees: the estimate of a trim (which makes gc repack
// packs shared with live blobs) and of rm equals what gc frees once the
// change is made, to the byte, and changes nothing before.
func TestEstimateIsWhatGCFrees(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for _, step := range []struct {
		name   string
		w      refs.Without
		change func(tx *bolt.Tx) error
	}{
		{"trim m --keep 1", refs.Without{Keep: map[string]int{"m": 1}}, func(tx *bolt.Tx) error { _, err := refs.TrimHistory(tx, "m", 1); return err }},
		{"rm x:v1", refs.Without{Tags: map[string]bool{"x:v1": true}}, func(tx *bolt.Tx) error { return refs.RemoveTag(tx, "x", "v1") }},
		{"rm m", refs.Without{Refs: map[string]bool{"m": true}}, func(tx *bolt.Tx) error { return refs.RemoveRef(tx, "m") }},
	} {
		before := files(t, f.st)
		est, err := gc.EstimateWithout(ctx, f.st, step.w, noGrace)
		if err != nil {
			t.Fatal(err)
		}
		if got := files(t, f.st); len(got) != len(before) {
			t.Fatalf("%s: the estimate changed the store's files", step.name)
		}
		if est.FreesBytes <= 0 || len(est.Unnamed) == 0 {
			t.Errorf("%s: estimate %+v frees nothing", step.name, est)
		}
		f.update(t, step.change)
		_, res, err := gc.Run(ctx, f.st, noGrace)
		if err != nil {
			t.Fatal(err)
		}
		if res.FreedBytes != est.GCFreesAfter || est.GCFreesAfter != est.GCFreesNow+est.FreesBytes {
			t.Errorf("%s: gc freed %d bytes; the estimate said %d after (%d now + %d)", step.name, res.FreedBytes, est.GCFreesAfter, est.GCFreesNow, est.FreesBytes)
		}
		if res.FreedBlobs < est.FreesBlobs {
			t.Errorf("%s: gc freed %d blobs, the estimate %d", step.name, res.FreedBlobs, est.FreesBlobs)
		}
	}
	if _, err := gc.EstimateWithout(ctx, f.st, refs.Without{Refs: map[string]bool{"m": true}}, noGrace); err == nil {
		t.Errorf("an estimate of removing a ref that is gone succeeded")
	}
}

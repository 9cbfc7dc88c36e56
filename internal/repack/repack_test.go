package repack_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/gc"
	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/repack"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/store/storetest"
	"github.com/mstore/mstore/internal/testmodel"
)

// spec: BF16, an embedding of 1 MiB (a loose blob) and small packed ones.
var spec = testmodel.Spec{Layers: 1, Hidden: 64, Vocab: 8192, DType: "BF16"}

// model writes a model whose tensors hold BF16 weights ~N(0, 0.02); a
// fine-tune (ft > 0) changes the low mantissa bits of a third of the
// elements of every tensor, as a small update does.
func model(t *testing.T, root, name string, ft uint64) storetest.Model {
	t.Helper()
	return seededModel(t, root, name, 1, ft)
}

// seededModel is model with the base weights drawn from seed.
func seededModel(t *testing.T, root, name string, seed, ft uint64) storetest.Model {
	t.Helper()
	files, err := spec.BuildWith(testmodel.FineTunedBF16(seed, ft))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, name)
	if err := testmodel.Write(dir, files); err != nil {
		t.Fatal(err)
	}
	return storetest.Model{Dir: dir, Files: files}
}

func open(t *testing.T, root string) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(root, "store"), true, store.Options{LockTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func requireCheckout(t *testing.T, st *store.Store, d objects.Digest, m storetest.Model) {
	t.Helper()
	got, err := storetest.Checkout(st, d)
	if err != nil {
		t.Fatalf("checkout %s: %v", d.Short(), err)
	}
	for p, want := range m.Files {
		if !bytes.Equal(got[p], want) {
			t.Fatalf("checkout %s: %s differs", d.Short(), p)
		}
	}
}

func requireClean(t *testing.T, st *store.Store) *store.FsckReport {
	t.Helper()
	r, err := st.Fsck(context.Background(), store.FsckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK || len(r.Leftovers) != 0 {
		t.Fatalf("fsck: ok=%v missing=%v corrupt=%v leftovers=%v", r.OK, r.Missing, r.Corrupt, r.Leftovers)
	}
	return r
}

// Repack codes every blob, finds each fine-tuned tensor's base in the
// ref's previous version, keeps chains at depth 1, and leaves a store that
// checks out bit for bit, passes fsck with no leftovers, survives an index
// rebuild, and that a second run leaves alone.
func TestRepackCodesAndFindsDeltaBases(t *testing.T) {
	root := t.TempDir()
	st := open(t, root)
	base, ft := model(t, root, "base", 0), model(t, root, "ft", 7)
	db := storetest.Add(t, st, base, "m")
	df := storetest.Add(t, st, ft, "m")
	before, _ := st.Usage()

	plan, res, err := repack.Run(context.Background(), st, repack.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deltas == 0 || res.Grouped == 0 || res.Unreadable != 0 || plan.WithBase == 0 {
		t.Fatalf("plan %+v result %+v: want grouped blobs and deltas", plan, res)
	}
	recs := storetest.BlobRecords(t, st)
	var baseChunks = map[objects.Digest]bool{}
	var m *objects.Manifest
	st.View(func(tx *bolt.Tx) error { m, err = st.Manifest(tx, db); return err })
	for _, tn := range m.Tensors {
		for _, c := range tn.Chunks {
			baseChunks[c] = true
		}
	}
	for d, r := range recs {
		if r.Coding != store.CodingDelta {
			continue
		}
		if !baseChunks[r.Base] {
			t.Fatalf("delta %s has base %s, not a chunk of the previous version", d.Short(), r.Base.Short())
		}
		if b := recs[r.Base]; b.Coding == store.CodingDelta {
			t.Fatalf("delta %s against a delta", d.Short())
		}
	}
	after, _ := st.Usage()
	if after.StoredBlobBytes*10 > before.StoredBlobBytes*8 {
		t.Fatalf("stored %d of %d bytes, want <= 0.8", after.StoredBlobBytes, before.StoredBlobBytes)
	}
	if after.Codings["delta"].Ratio > 0.45 {
		t.Fatalf("delta ratio %.3f, want <= 0.45", after.Codings["delta"].Ratio)
	}
	requireCheckout(t, st, db, base)
	requireCheckout(t, st, df, ft)
	requireClean(t, st)

	_, again, err := repack.Run(context.Background(), st, repack.Options{})
	if err != nil || again.Grouped+again.Deltas != 0 {
		t.Fatalf("second run coded %d more (%v), want none", again.Grouped+again.Deltas, err)
	}

	if err := os.Remove(filepath.Join(st.Dir(), "index.db")); err != nil {
		t.Fatal(err)
	}
	rep, err := names.RebuildIndex(context.Background(), st.Dir(), store.Options{}, 1)
	if err != nil || !rep.OK {
		t.Fatalf("rebuild: %+v %v", rep, err)
	}
	rebuilt := storetest.BlobRecords(t, st)
	for d, r := range recs {
		g := rebuilt[d]
		g.BaseRec, r.BaseRec = nil, nil
		if g != r {
			t.Fatalf("rebuilt record of %s = %+v, want %+v", d.Short(), g, r)
		}
	}
	requireCheckout(t, st, df, ft)
}

// gc never strands a delta: removing the only version that needs a base
// codes its deltas again on their own first, then frees the base.
func TestGCRecodesDeltasBeforeRemovingTheirBase(t *testing.T) {
	root := t.TempDir()
	st := open(t, root)
	base, ft := model(t, root, "base", 0), model(t, root, "ft", 9)
	storetest.Add(t, st, base, "b")
	df := storetest.Add(t, st, ft, "f") // another ref: the base is found in the oldest version
	if _, res, err := repack.Run(context.Background(), st, repack.Options{}); err != nil || res.Deltas == 0 {
		t.Fatalf("repack: %+v %v", res, err)
	}
	err := st.Update(func(tx *bolt.Tx) error { return refs.RemoveRef(tx, "b") })
	if err != nil {
		t.Fatal(err)
	}
	plan, _, err := gc.Run(context.Background(), st, gc.Options{Grace: -1, LockWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Reencoded == 0 || plan.FreedBlobs == 0 {
		t.Fatalf("gc plan: %d deltas coded again, %d blobs freed; want both", plan.Reencoded, plan.FreedBlobs)
	}
	for d, r := range storetest.BlobRecords(t, st) {
		if r.Coding == store.CodingDelta {
			t.Fatalf("delta %s survived the removal of its base's last version", d.Short())
		}
	}
	requireCheckout(t, st, df, ft)
	requireClean(t, st)
}

// A repack whose plan is overtaken by a change to a record it would move
// (an add healing that blob) moves nothing and says conflict; an
// interrupted repack changes nothing; the next run does the work.
func TestRepackConflictAndInterrupt(t *testing.T) {
	root := t.TempDir()
	st := open(t, root)
	base := model(t, root, "base", 0)
	d := storetest.Add(t, st, base, "m")
	before := storetest.BlobRecords(t, st)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, res, err := repack.Run(ctx, st, repack.Options{}); err == nil || (res != nil && res.Batches != 0) {
		t.Fatalf("cancelled repack: %+v, %v", res, err)
	}
	if got := storetest.BlobRecords(t, st); len(got) != len(before) {
		t.Fatal("a cancelled repack changed records")
	}
	for k, r := range storetest.BlobRecords(t, st) {
		if r.Coded() {
			t.Fatalf("a cancelled repack coded %s", k.Short())
		}
	}

	plan, err := repack.NewPlan(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	// Someone rewrites one record meanwhile (what an add healing a suspect
	// blob does).
	var victim store.BlobRecord
	for _, r := range before {
		if r.Encoding == store.EncodingRaw {
			victim = r
		}
	}
	err = st.Update(func(tx *bolt.Tx) error {
		if err := store.MarkSuspect(tx, map[objects.Digest]string{victim.Digest: "test"}); err != nil {
			return err
		}
		moved := victim
		moved.Encoding, moved.Offset = store.EncodingPacked, 0
		return store.RecordBlobs(tx, []store.BlobRecord{moved})
	})
	if err != nil {
		t.Fatal(err)
	}
	lock, _ := st.Lock(store.LockShared, time.Second)
	_, err = plan.Execute(context.Background(), st, repack.Options{})
	lock.Unlock()
	if !errors.Is(err, errs.Conflict) {
		t.Fatalf("repack over a changed record: %v, want conflict", err)
	}
	// Put the record back as it was, and repack for real.
	st.Update(func(tx *bolt.Tx) error {
		store.MarkSuspect(tx, map[objects.Digest]string{victim.Digest: "test"})
		return store.RecordBlobs(tx, []store.BlobRecord{victim})
	})
	if _, res, err := repack.Run(context.Background(), st, repack.Options{}); err != nil || res.Grouped == 0 {
		t.Fatalf("repack after the conflict: %+v %v", res, err)
	}
	requireCheckout(t, st, d, base)
}

// `add --base REF` (SetDeltaBase) beats the fallback (the oldest version
// with the tensor), and survives an index rebuild.
func TestDeltaBaseHint(t *testing.T) {
	root := t.TempDir()
	st := open(t, root)
	other, base, ft := seededModel(t, root, "other", 5, 0), model(t, root, "base", 0), model(t, root, "ft", 3)
	storetest.Add(t, st, other, "other") // the oldest: what the fallback would pick
	db := storetest.Add(t, st, base, "base")
	df := storetest.Add(t, st, ft, "ft")
	if err := st.SetDeltaBase(df, db); err != nil {
		t.Fatal(err)
	}
	if _, res, err := repack.Run(context.Background(), st, repack.Options{}); err != nil || res.Deltas == 0 {
		t.Fatalf("repack: %+v %v", res, err)
	}
	var m *objects.Manifest
	st.View(func(tx *bolt.Tx) error { var err error; m, err = st.Manifest(tx, db); return err })
	chunks := map[objects.Digest]bool{}
	for _, tn := range m.Tensors {
		for _, c := range tn.Chunks {
			chunks[c] = true
		}
	}
	for d, r := range storetest.BlobRecords(t, st) {
		if r.Coding == store.CodingDelta && !chunks[r.Base] {
			t.Fatalf("delta %s is against %s, not a chunk of the hinted base", d.Short(), r.Base.Short())
		}
	}
	requireCheckout(t, st, df, ft)
	if err := os.Remove(filepath.Join(st.Dir(), "index.db")); err != nil {
		t.Fatal(err)
	}
	if rep, err := names.RebuildIndex(context.Background(), st.Dir(), store.Options{}, 1); err != nil || !rep.OK {
		t.Fatalf("rebuild: %+v %v", rep, err)
	}
	var hints map[objects.Digest]objects.Digest
	st.View(func(tx *bolt.Tx) error { hints = store.DeltaBaseHints(tx); return nil })
	if hints[df] != db {
		t.Fatalf("hints after rebuild: %v, want %s → %s", hints, df.Short(), db.Short())
	}
}

// Removing the version that holds the deltas frees them and keeps their
// base, which another version still needs; a dry run changes nothing.
func TestGCKeepsBasesLiveVersionsNeed(t *testing.T) {
	root := t.TempDir()
	st := open(t, root)
	base, ft := model(t, root, "base", 0), model(t, root, "ft", 11)
	db := storetest.Add(t, st, base, "b")
	storetest.Add(t, st, ft, "f")
	if _, res, err := repack.Run(context.Background(), st, repack.Options{}); err != nil || res.Deltas == 0 {
		t.Fatalf("repack: %+v %v", res, err)
	}
	deltas := 0
	for _, r := range storetest.BlobRecords(t, st) {
		if r.Coding == store.CodingDelta {
			deltas++
		}
	}
	before := storetest.BlobRecords(t, st)
	plan, res, err := gc.Run(context.Background(), st, gc.Options{Grace: -1, LockWait: time.Second, DryRun: true})
	if err != nil || res != nil || plan.Reencoded != 0 || len(storetest.BlobRecords(t, st)) != len(before) {
		t.Fatalf("dry run: %+v %+v %v", plan, res, err)
	}
	if err := st.Update(func(tx *bolt.Tx) error { return refs.RemoveRef(tx, "f") }); err != nil {
		t.Fatal(err)
	}
	plan, _, err = gc.Run(context.Background(), st, gc.Options{Grace: -1, LockWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Reencoded != 0 || plan.FreedBlobs < deltas {
		t.Fatalf("gc: %d re-coded, %d freed; want 0 and at least the %d deltas", plan.Reencoded, plan.FreedBlobs, deltas)
	}
	for d, r := range storetest.BlobRecords(t, st) {
		if r.Coding == store.CodingDelta {
			t.Fatalf("delta %s outlived its version", d.Short())
		}
	}
	requireCheckout(t, st, db, base)
	requireClean(t, st)
}

// A fine-tune grouped before its base was known becomes a delta once it
// is (here by a hint set afterwards), when the delta is smaller; against
// an unrelated base the delta is not smaller and the grouped blob stays.
// Either way the versions check out bit for bit and a further run codes
// nothing.
func TestRepackTurnsGroupedIntoDelta(t *testing.T) {
	root := t.TempDir()
	st := open(t, root)
	other, base, ft := seededModel(t, root, "other", 5, 0), model(t, root, "base", 0), model(t, root, "ft", 3)
	df := storetest.Add(t, st, ft, "ft")
	if _, res, err := repack.Run(context.Background(), st, repack.Options{}); err != nil || res.Grouped == 0 || res.Deltas != 0 {
		t.Fatalf("first repack: %+v %v, want grouped blobs only", res, err)
	}
	grouped := storetest.BlobRecords(t, st)
	dother := storetest.Add(t, st, other, "other")
	if err := st.SetDeltaBase(df, dother); err != nil {
		t.Fatal(err)
	}
	plan, res, err := repack.Run(context.Background(), st, repack.Options{})
	if err != nil || plan.Regrouped == 0 || res.KeptGrouped != plan.Regrouped || res.Deltas != 0 {
		t.Fatalf("against an unrelated base: plan %+v result %+v %v, want every grouped blob kept", plan, res, err)
	}
	for d, r := range storetest.BlobRecords(t, st) {
		if g, ok := grouped[d]; ok && (g.Coding != r.Coding || g.Stored != r.Stored) {
			t.Fatalf("%s moved from %s to %s", d.Short(), g.Coding, r.Coding)
		}
	}

	db := storetest.Add(t, st, base, "base")
	if err := st.SetDeltaBase(df, db); err != nil {
		t.Fatal(err)
	}
	before, _ := st.Usage()
	plan, res, err = repack.Run(context.Background(), st, repack.Options{})
	if err != nil || plan.Regrouped == 0 || res.Deltas == 0 {
		t.Fatalf("against its base: plan %+v result %+v %v, want grouped blobs turned into deltas", plan, res, err)
	}
	after, _ := st.Usage()
	if after.StoredBlobBytes >= before.StoredBlobBytes {
		t.Fatalf("stored %d bytes after, %d before", after.StoredBlobBytes, before.StoredBlobBytes)
	}
	for d, r := range storetest.BlobRecords(t, st) {
		if g, ok := grouped[d]; ok && g.Coding == store.CodingGrouped && r.Coding == store.CodingDelta && r.Stored >= g.Stored {
			t.Fatalf("%s became a delta of %d bytes, grouped it took %d", d.Short(), r.Stored, g.Stored)
		}
	}
	requireCheckout(t, st, df, ft)
	requireCheckout(t, st, db, base)
	requireClean(t, st)
	if _, again, err := repack.Run(context.Background(), st, repack.Options{}); err != nil || again.Grouped+again.Deltas != 0 {
		t.Fatalf("a further run coded %+v (%v), want nothing", again, err)
	}
}

// A coding that does not decode to its blob's bytes (a coder's bug, made
// here by flipping a byte of every coding) never replaces the raw blob:
// repack reports each as a problem saying so, codes nothing, and the store checks out bit for bit and passes fsck.
func TestRepackKeepsRawWhenItsCodingDoesNotDecode(t *testing.T) {
	root := t.TempDir()
	st := open(t, root)
	base := model(t, root, "base", 0)
	db := storetest.Add(t, st, base, "m")
	before := storetest.BlobRecords(t, st)

	restore := repack.SetCodedHook(func(stored []byte) { stored[len(stored)/2] ^= 0x10 })
	_, res, err := repack.Run(context.Background(), st, repack.Options{})
	restore()
	if err != nil {
		t.Fatal(err)
	}
	if res.Unreadable == 0 || res.Grouped+res.Deltas != 0 || len(res.Problems) != res.Unreadable {
		t.Fatalf("result %+v: want every coding refused", res)
	}
	for _, p := range res.Problems {
		if !strings.Contains(p, "coding does not decode to its bytes") {
			t.Fatalf("problem %q does not say the coding was refused", p)
		}
	}
	for d, r := range storetest.BlobRecords(t, st) {
		if r.Coded() || r.Encoding != before[d].Encoding {
			t.Fatalf("blob %s is now %v (was %v)", d.Short(), r.Coding, before[d].Coding)
		}
	}
	requireCheckout(t, st, db, base)
	requireClean(t, st)

	// Without the flip, the same store codes.
	if _, res, err = repack.Run(context.Background(), st, repack.Options{}); err != nil || res.Grouped == 0 || res.Unreadable != 0 {
		t.Fatalf("second repack: %+v, %v", res, err)
	}
	requireCheckout(t, st, db, base)
}

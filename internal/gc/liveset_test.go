package gc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/store/storetest"
)

// A liveSet gives back every digest added, once each, in key order, in
// every pass, however the additions fall around its merges and spills,
// and never holds more than its budget between additions:
// runs of random sizes drawn from a pool (many repeats, as versions
// sharing blobs give), with budgets from a few digests (a spill at almost
// every settle, and the runs merged into one each time they reach
// maxRuns) to more than the pool (nothing spilled). Its runs are unnamed
// files: the scratch directory stays empty.
func TestLiveSet(t *testing.T) {
	pool := make([]objects.Digest, 1500)
	for i := range pool {
		pool[i] = objects.Sum([]byte{byte(i), byte(i >> 8)})
	}
	dir := t.TempDir()
	created := 0 // files, over a set's life
	scratch := func() (*os.File, error) {
		created++
		f, err := os.CreateTemp(dir, "run")
		if err == nil {
			err = os.Remove(f.Name())
		}
		return f, err
	}
	spilled := map[bool]bool{}
	mergedRuns := false // more files made than maxRuns: the runs were merged
	sortedPool := slices.Clone(pool)
	objects.SortDigests(sortedPool)
	for seed := range uint64(32) {
		r := rand.New(rand.NewPCG(seed, 2))
		s := newLiveSet([]int{1, 7, 100, 5000}[seed%4]*len(objects.Digest{}), scratch)
		created = 0
		var all []objects.Digest
		for range r.IntN(60) {
			n := r.IntN(300)
			s.reserve(n)
			for range n {
				d := pool[r.IntN(len(pool))]
				s.pending = append(s.pending, d)
				all = append(all, d)
			}
			if err := s.settle(); err != nil {
				t.Fatal(err)
			}
			// What it holds stays within its budget, whatever it has seen.
			if len(s.held) >= s.budget || len(s.pending) >= s.budget || cap(s.pending) > 3*s.budget+n {
				t.Fatalf("seed %d: %d digests held, %d pending (room for %d), budget %d", seed, len(s.held), len(s.pending), cap(s.pending), s.budget)
			}
		}
		s.finish()
		spilled[len(s.runs) > 0] = true
		mergedRuns = mergedRuns || created > maxRuns && len(s.runs) <= maxRuns
		objects.SortDigests(all)
		want := slices.Compact(all)
		for pass := range 2 {
			st := s.stream(true)
			var got []objects.Digest
			for d, ok := st.peek(); ok; d, ok = st.advance() {
				got = append(got, d)
			}
			if st.err != nil || !slices.Equal(got, want) {
				t.Fatalf("seed %d, pass %d (%d runs): %d digests (%v), want %d, sorted, each once", seed, pass, len(s.runs), len(got), st.err, len(want))
			}
		}
		st := s.stream(true)
		for _, d := range sortedPool {
			in := slices.Contains(want, d)
			if got := st.seek(d, nil); got != in {
				t.Fatalf("seed %d: seek(%s) = %v, want %v", seed, d.Short(), got, in)
			}
		}
		s.close()
	}
	if !spilled[true] || !spilled[false] || !mergedRuns {
		t.Fatalf("sets spilled: %v, runs merged: %v; the test must try both", spilled, mergedRuns)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
		t.Fatalf("runs left files: %v", left)
	}
}

// A run that cannot be read back (here a file open for writing only) fails
// the plan with its I/O error, which names no class of the index's (the
// command reports it as io_error), and gc changes nothing.
func TestPlanFailsOnAnUnreadableRun(t *testing.T) {
	root := t.TempDir()
	st, err := store.Open(filepath.Join(root, "store"), true, store.Options{LockTimeout: 5 * time.Second, FS: storetest.NoSyncFS{}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := storetest.Variant(t, root, "a", 1), storetest.Variant(t, root, "b", 2)
	storetest.Add(t, st, a, "a")
	storetest.Add(t, st, b, "b")
	runs := t.TempDir()
	n := 0
	writeOnly := func() (*os.File, error) {
		n++
		return os.OpenFile(filepath.Join(runs, fmt.Sprint("run", n)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	}
	opts := Options{Grace: -1, LockWait: time.Second, LiveBudget: 32, scratch: writeOnly}
	_, _, err = Run(context.Background(), st, opts)
	if err == nil || !errors.Is(err, syscall.EBADF) || errs.ClassOf(err) != 0 {
		t.Fatalf("gc over a run it cannot read: err = %v (class %v), want the read's EBADF and no class", err, errs.ClassOf(err))
	}
	storetest.RequireCheckout(t, st, "a", a)
	storetest.RequireCheckout(t, st, "b", b)
}

package gc

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mstore/mstore/internal/objects"
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

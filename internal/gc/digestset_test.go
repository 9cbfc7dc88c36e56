package gc

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mstore/mstore/internal/objects"
)

// A digestSet holds every digest added, once each, in key order, however
// the additions fall around its merges: runs of random sizes drawn from a
// small pool (many repeats, as versions sharing blobs give), with the
// merge threshold lowered so that most additions merge.
func TestDigestSet(t *testing.T) {
	pool := make([]objects.Digest, 300)
	for i := range pool {
		pool[i] = objects.Sum([]byte{byte(i), byte(i >> 8)})
	}
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 2))
		var s digestSet
		var all []objects.Digest
		for range r.IntN(20) {
			n := r.IntN(400)
			s.reserve(n)
			for range n {
				d := pool[r.IntN(len(pool))]
				s.pending = append(s.pending, d)
				all = append(all, d)
			}
			if r.IntN(3) > 0 {
				s.flush() // settle would wait for a million
			}
		}
		got := s.sorted()
		objects.SortDigests(all)
		want := slices.Compact(all)
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: %d digests held, want %d (sorted, each once)", seed, len(got), len(want))
		}
		for _, d := range pool {
			if objects.HasDigest(got, d) != slices.Contains(want, d) {
				t.Fatalf("seed %d: has(%s) = %v", seed, d.Short(), objects.HasDigest(got, d))
			}
		}
	}
}

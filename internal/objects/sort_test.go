package objects

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// SortDigests gives what a comparison sort gives, on both sides of
// radixMin, with duplicates and digests that share their first bytes.
func TestSortDigests(t *testing.T) {
	for _, n := range []int{0, 1, 2, radixMin - 1, radixMin, 3 * radixMin, 100_000} {
		r := rand.New(rand.NewPCG(uint64(n), 1))
		ds := make([]Digest, n)
		for i := range ds {
			ds[i] = Sum([]byte{byte(i), byte(i >> 8), byte(i >> 16)})
			switch {
			case i > 0 && i%9 == 4:
				ds[i] = ds[r.IntN(i)] // a duplicate
			case i > 0 && i%7 == 3:
				copy(ds[i][:3], ds[i-1][:3]) // the same bucket and more
			}
		}
		want := slices.Clone(ds)
		slices.SortFunc(want, CompareDigests)
		SortDigests(ds)
		if !slices.Equal(ds, want) {
			t.Fatalf("%d digests sorted differently", n)
		}
	}
}

func BenchmarkSortDigests(b *testing.B) {
	src := make([]Digest, 100_000)
	for i := range src {
		src[i] = Sum([]byte{byte(i), byte(i >> 8), byte(i >> 16)})
	}
	ds := make([]Digest, len(src))
	b.Run("radix", func(b *testing.B) {
		for b.Loop() {
			copy(ds, src)
			SortDigests(ds)
		}
	})
	b.Run("comparisons", func(b *testing.B) {
		for b.Loop() {
			copy(ds, src)
			slices.SortFunc(ds, CompareDigests)
		}
	})
}

package store

import (
	"math/rand/v2"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/objects"
)

// MissingBlobs names exactly the blobs not recorded, in the order given:
// digests in key order (walked with one cursor, among them runs of
// recorded ones longer than its few steps forward, repeats, and ones past
// the last key) and digests in any other order.
func TestMissingBlobs(t *testing.T) {
	st := newStore(t)
	_, recs := rawBlobs(t, st, 400)
	if err := st.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, recs[:300]) }); err != nil {
		t.Fatal(err)
	}
	recorded := map[objects.Digest]bool{}
	for _, r := range recs[:300] {
		recorded[r.Digest] = true
	}
	var ds []objects.Digest
	for _, r := range recs {
		ds = append(ds, r.Digest)
	}
	for i := range 50 {
		ds = append(ds, objects.Sum([]byte{byte(i), 'x'})) // never written
	}
	ds = append(ds, ds[7], ds[350], objects.Digest{0xff, 0xff, 0xff}) // repeats; past every key
	rng := rand.New(rand.NewPCG(3, 4))
	shuffled := slices.Clone(ds)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	sorted := slices.Clone(ds)
	objects.SortDigests(sorted)
	var sparse []objects.Digest // far apart in the index: a seek each
	for i := 0; i < len(sorted); i += 23 {
		sparse = append(sparse, sorted[i])
	}
	for _, in := range [][]objects.Digest{sorted, shuffled, sparse} {
		var want []objects.Digest
		for _, d := range in {
			if !recorded[d] {
				want = append(want, d)
			}
		}
		var got []objects.Digest
		st.View(func(tx *bolt.Tx) error { got = MissingBlobs(tx, in); return nil })
		if !slices.Equal(got, want) {
			t.Fatalf("MissingBlobs (sorted %v) = %d digests, want %d", slices.IsSortedFunc(in, objects.CompareDigests), len(got), len(want))
		}
	}
}

package store

import (
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/objects"
)

// BenchmarkRecordSmallBlobs records the blobs of an add of 100,000 small
// tensors into a new store, as add does: RecordAhead, then the last batch
// in one more transaction.
func BenchmarkRecordSmallBlobs(b *testing.B) {
	const n = 100_000
	for b.Loop() {
		b.StopTimer()
		st := newStore(b)
		recs := make([]BlobRecord, n)
		for i := range recs {
			d := objects.Sum([]byte{byte(i), byte(i >> 8), byte(i >> 16)})
			recs[i] = BlobRecord{Digest: d, Size: 512, Encoding: EncodingPacked, Pack: PackID{byte(i / 50_000)}, Offset: int64(i%50_000) * 512}
		}
		slices.SortFunc(recs, compareRecords) // as BlobWriter.Commit gives them
		b.StartTimer()
		rest, err := st.RecordAhead(recs, "")
		if err != nil {
			b.Fatal(err)
		}
		if err := st.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, rest) }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/blob")
}

// BenchmarkSortRecords sorts the records of 100,000 blobs, as BlobWriter.Commit does.
func BenchmarkSortRecords(b *testing.B) {
	const n = 100_000
	recs := make([]BlobRecord, n)
	for b.Loop() {
		b.StopTimer()
		for i := range recs {
			recs[i] = BlobRecord{Digest: objects.Sum([]byte{byte(i), byte(i >> 8), byte(i >> 16)}), Size: 512}
		}
		b.StartTimer()
		sortByDigest(recs)
	}
}

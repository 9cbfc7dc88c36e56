package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/journal"
	"github.com/mstore/mstore/internal/objects"
)

// RecordBlobs walks the index with the records in key order: among
// records the index has (kept as they are), records it lacks (added, each
// packed one journaled once) and a record given twice, in any mix and at
// either end of the key space.
func TestRecordBlobsKeepsWhatIsRecorded(t *testing.T) {
	st := newStore(t)
	var all []BlobRecord
	for i := range 40 {
		d := objects.Sum([]byte{byte(i)})
		all = append(all, BlobRecord{Digest: d, Size: int64(i + 1), Encoding: EncodingPacked, Pack: PackID{byte(i % 3)}, Offset: int64(i)})
	}
	all = sortedRecords(all)
	var first, second []BlobRecord
	for i, r := range all {
		if i%3 == 0 || i == len(all)-1 {
			first = append(first, r)
		}
		moved := r
		moved.Offset += 1000 // another copy: must not replace the one recorded
		second = append(second, moved)
	}
	second = append(second, second[5]) // twice
	for _, batch := range [][]BlobRecord{first, second} {
		if err := st.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, batch) }); err != nil {
			t.Fatal(err)
		}
	}
	err := st.View(func(tx *bolt.Tx) error {
		for i, r := range all {
			got, ok, err := Blob(tx, r.Digest)
			if err != nil || !ok {
				t.Fatalf("blob %d not recorded: %v", i, err)
			}
			wantOff := r.Offset
			if !slices.ContainsFunc(first, func(f BlobRecord) bool { return f.Digest == r.Digest }) {
				wantOff += 1000
			}
			if got.Offset != wantOff {
				t.Errorf("blob %d recorded at %d, want %d", i, got.Offset, wantOff)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := journal.Read(st.journalPath())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[objects.Digest]int{}
	for _, b := range l.Batches {
		for _, r := range b.Records {
			if r.Op == journal.OpPacked {
				seen[r.Digest]++
			}
		}
	}
	for i, r := range all {
		if seen[r.Digest] != 1 {
			t.Errorf("blob %d journaled %d times, want once", i, seen[r.Digest])
		}
	}
}

// RecordAhead records all but the last batch of RecordBatch records, each
// batch a transaction and a journal batch of its own, sorting what it is
// given; what it hands back is the rest, in key order, not yet recorded.
func TestRecordAheadBatches(t *testing.T) {
	st := newStore(t)
	n := 2*RecordBatch + 7
	recs := make([]BlobRecord, n)
	for i := range recs {
		d := objects.Sum([]byte{byte(i), byte(i >> 8), byte(i >> 16)})
		recs[i] = BlobRecord{Digest: d, Size: 512, Encoding: EncodingPacked, Pack: PackID{1}, Offset: int64(i) * 512}
	}
	rest, err := st.RecordAhead(recs, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != 7 || !slices.IsSortedFunc(rest, compareRecords) || !slices.IsSortedFunc(recs, compareRecords) {
		t.Fatalf("handed back %d records (sorted: %v), want the last 7 in key order", len(rest), slices.IsSortedFunc(rest, compareRecords))
	}
	// A copy: the records already recorded are not kept alive by it.
	if cap(rest) != len(rest) || &rest[0] == &recs[n-7] || !slices.Equal(rest, recs[n-7:]) {
		t.Fatalf("handed back a slice of %d records, cap %d, sharing the input: %v", len(rest), cap(rest), &rest[0] == &recs[n-7])
	}
	err = st.View(func(tx *bolt.Tx) error {
		for i, r := range recs {
			_, ok, err := Blob(tx, r.Digest)
			if err != nil {
				return err
			}
			if ok != (i < n-7) {
				t.Fatalf("record %d of %d: recorded = %v", i, n, ok)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := journal.Read(st.journalPath())
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, b := range l.Batches {
		sizes = append(sizes, len(b.Records))
	}
	if !slices.Equal(sizes, []int{RecordBatch, RecordBatch}) {
		t.Errorf("journal batches of %v records, want two of %d", sizes, RecordBatch)
	}
}

// In an index of many pages, RecordAhead's batches also keep to ranges of
// the key space, one for each rangeIndexBytes of the index, so that no
// transaction reaches into most of the index's pages; the last range's
// records are handed back, for the version's transaction.
func TestRecordAheadKeepsBatchesToKeyRanges(t *testing.T) {
	defer func(b int64) { rangeIndexBytes = b }(rangeIndexBytes)
	rangeIndexBytes = 64 << 10
	st := newStore(t)
	rec := func(i int) BlobRecord {
		return BlobRecord{Digest: objects.Sum([]byte{byte(i), byte(i >> 8), byte(i >> 16)}), Size: 512,
			Encoding: EncodingPacked, Pack: PackID{1}, Offset: int64(i) * 512}
	}
	var old []BlobRecord
	for i := range 8000 {
		old = append(old, rec(i))
	}
	if err := st.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, old) }); err != nil {
		t.Fatal(err)
	}
	ranges := st.keyRanges()
	if ranges < 4 {
		t.Fatalf("an index of 8,000 records in %d ranges of %d bytes: the test needs more", ranges, rangeIndexBytes)
	}
	var recs []BlobRecord
	for i := range 3000 {
		recs = append(recs, rec(8000+i))
	}
	before, err := journal.Read(st.journalPath())
	if err != nil {
		t.Fatal(err)
	}
	rest, err := st.RecordAhead(recs, "")
	if err != nil {
		t.Fatal(err)
	}
	l, err := journal.Read(st.journalPath())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for _, b := range l.Batches[len(before.Batches):] {
		var first objects.Digest
		n := 0
		for _, r := range b.Records {
			if r.Op != journal.OpPacked {
				continue
			}
			if n == 0 {
				first = r.Digest
			}
			n++
			if keyRange(r.Digest, ranges) != keyRange(first, ranges) {
				t.Fatalf("a batch reaches into two ranges of %d: %s and %s", ranges, first.Short(), r.Digest.Short())
			}
		}
		if n == 0 || n > RecordBatch || seen[keyRange(first, ranges)] {
			t.Fatalf("a batch of %d records, in range %d (seen before: %v)", n, keyRange(first, ranges), seen[keyRange(first, ranges)])
		}
		seen[keyRange(first, ranges)] = true
	}
	if len(seen) != int(ranges)-1 || len(rest) == 0 {
		t.Fatalf("%d batches recorded ahead, %d records handed back; want one batch for each of %d ranges but the last", len(seen), len(rest), ranges)
	}
	for _, r := range rest {
		if keyRange(r.Digest, ranges) != ranges-1 {
			t.Fatalf("handed back %s, in range %d of %d: only the last range's records stay for the version", r.Digest.Short(), keyRange(r.Digest, ranges), ranges)
		}
	}
}

// RecordInBatches records every record it is given, the last batch too,
// in one transaction a range.
func TestRecordInBatchesRecordsAll(t *testing.T) {
	defer func(b int64) { rangeIndexBytes = b }(rangeIndexBytes)
	rangeIndexBytes = 32 << 10
	st := newStore(t)
	var recs []BlobRecord
	for i := range 3000 {
		recs = append(recs, BlobRecord{Digest: objects.Sum([]byte{byte(i), byte(i >> 8), 7}), Size: 64, Encoding: EncodingPacked, Pack: PackID{7}, Offset: int64(i) * 64})
	}
	if err := st.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, recs[:1000]) }); err != nil {
		t.Fatal(err)
	}
	before, err := journal.Read(st.journalPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RecordInBatches(slices.Clone(recs[1000:])); err != nil {
		t.Fatal(err)
	}
	after, err := journal.Read(st.journalPath())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(after.Batches) - len(before.Batches); n < 2 {
		t.Fatalf("%d transactions for 2,000 records in an index of several ranges, want more than one", n)
	}
	st.View(func(tx *bolt.Tx) error {
		for i, r := range recs {
			if _, ok, err := Blob(tx, r.Digest); !ok || err != nil {
				t.Fatalf("record %d not recorded (%v)", i, err)
			}
		}
		return nil
	})
}

// RemoveBlobRecords removes what it was given prints of, and refuses, with
// a conflict and removing nothing, a record that changed since its print
// was taken or is gone.
func TestRemoveBlobRecordsChecksPrints(t *testing.T) {
	st := newStore(t)
	recs := commit(t, st, []byte("one"), []byte("two"), []byte("three"))
	prints := make([]RecordPrint, len(recs))
	for i, r := range recs {
		prints[i] = PrintOf(r)
	}
	moved := recs[1]
	moved.Offset++
	err := st.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketBlobs).Put(moved.Digest[:], encodeBlobRecord(moved))
	})
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(func(tx *bolt.Tx) error { return RemoveBlobRecords(tx, prints) })
	if !errors.Is(err, errs.Conflict) {
		t.Fatalf("removal of a record changed since its print: err = %v, want conflict", err)
	}
	for _, p := range [][]RecordPrint{{prints[0], prints[2]}, {prints[0]}} {
		err = st.Update(func(tx *bolt.Tx) error { return RemoveBlobRecords(tx, p) })
		if len(p) == 2 && err != nil || len(p) == 1 && !errors.Is(err, errs.Conflict) {
			t.Fatalf("removal of %d records (the second time gone): err = %v", len(p), err)
		}
	}
	st.View(func(tx *bolt.Tx) error {
		for i, r := range recs {
			if _, ok, _ := Blob(tx, r.Digest); ok != (i == 1) {
				t.Errorf("record %d recorded: %v", i, ok)
			}
		}
		return nil
	})
}

// Batches cuts records in key order as RecordAhead does: every record
// once, each batch within one range and at most RecordBatch long.
func TestBatchesKeepToKeyRanges(t *testing.T) {
	defer func(b int64) { rangeIndexBytes = b }(rangeIndexBytes)
	st := newStore(t)
	var recs []BlobRecord
	for i := range RecordBatch + 5000 {
		recs = append(recs, BlobRecord{Digest: objects.Sum([]byte{byte(i), byte(i >> 8), byte(i >> 16)}), Size: 1, Encoding: EncodingPacked})
	}
	for _, size := range []int64{1 << 40, 4096} { // one range; more than there are records
		rangeIndexBytes = size
		ranges := st.keyRanges()
		sorted := slices.Clone(recs)
		sortByDigest(sorted)
		batches := Batches(st, sorted, recordDigest)
		var all []BlobRecord
		for _, b := range batches {
			if len(b) == 0 || len(b) > RecordBatch || keyRange(b[0].Digest, ranges) != keyRange(b[len(b)-1].Digest, ranges) {
				t.Fatalf("%d ranges: a batch of %d records from range %d to %d", ranges, len(b), keyRange(b[0].Digest, ranges), keyRange(b[len(b)-1].Digest, ranges))
			}
			all = append(all, b...)
		}
		if len(all) != len(recs) || !slices.IsSortedFunc(all, compareRecords) {
			t.Fatalf("%d ranges: batches of %d records in all (sorted: %v), want the %d given", ranges, len(all), slices.IsSortedFunc(all, compareRecords), len(recs))
		}
		if ranges == 1 && len(batches) != 2 || ranges > 1 && len(batches) <= 2 {
			t.Fatalf("%d ranges: %d batches", ranges, len(batches))
		}
	}
}

// Records put after every key the index holds fill its pages whole (the
// first add of a large model); records put among others keep bbolt's half
// pages, so that pages are not split into a full one and an almost empty
// one, again and again.
func TestAppendOnlyFillsPages(t *testing.T) {
	st := newStore(t)
	rec := func(i int) BlobRecord {
		return BlobRecord{Digest: objects.Sum([]byte{byte(i), byte(i >> 8), byte(i >> 16)}), Size: 512,
			Encoding: EncodingPacked, Pack: PackID{1}, Offset: int64(i) * 512}
	}
	fill := func() (float64, bolt.BucketStats) {
		var s bolt.BucketStats
		st.View(func(tx *bolt.Tx) error { s = tx.Bucket(bucketBlobs).Stats(); return nil })
		return float64(s.LeafInuse) / float64(s.LeafAlloc), s
	}
	var first []BlobRecord
	for i := range 20_000 {
		first = append(first, rec(i))
	}
	// RecordAhead's batches: each after the one before.
	rest, err := st.RecordAhead(first, "")
	if err == nil {
		err = st.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, rest) })
	}
	if err != nil {
		t.Fatal(err)
	}
	if f, s := fill(); f < 0.9 {
		t.Fatalf("pages %.0f%% full after records put in key order into an empty index (%d pages), want 90%% or more", 100*f, s.LeafPageN)
	}
	// Ten adds of 400 blobs among them: a page split full and almost empty
	// takes most of the next keys on its full side, and splits again.
	for a := range 10 {
		var more []BlobRecord
		for i := range 400 {
			more = append(more, rec(20_000+a*400+i))
		}
		if err := st.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, more) }); err != nil {
			t.Fatal(err)
		}
	}
	if f, s := fill(); f < 0.5 || s.KeyN != 24_000 {
		t.Fatalf("%d keys on %d leaf pages %.0f%% full after records put among others", s.KeyN, s.LeafPageN, 100*f)
	}
}

// sortByDigest puts records in key order, also those whose digests share
// their first 8 bytes, and keeps every record (duplicates too) whole.
func TestSortByDigest(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 100, 5000} {
		r := rand.New(rand.NewPCG(uint64(n), 7))
		var recs []BlobRecord
		for i := range n {
			d := objects.Sum([]byte{byte(i), byte(i >> 8)})
			if i%5 == 1 { // the same first 8 bytes as the one before
				copy(d[:8], recs[i-1].Digest[:8])
			}
			if i%7 == 3 { // the same digest
				d = recs[i-1].Digest
			}
			recs = append(recs, BlobRecord{Digest: d, Size: int64(i), Offset: r.Int64N(1 << 30), Encoding: EncodingPacked})
		}
		want := slices.Clone(recs)
		slices.SortStableFunc(want, compareRecords)
		got := slices.Clone(recs)
		sortByDigest(got)
		if !slices.IsSortedFunc(got, compareRecords) {
			t.Fatalf("%d records: not in key order", n)
		}
		// Equal digests may come in either order: compare each run.
		key := func(r BlobRecord) string { return fmt.Sprint(r.Digest, r.Size) }
		for i := 0; i < len(got); {
			j := i
			for j < len(got) && got[j].Digest == got[i].Digest {
				j++
			}
			a, b := slices.Clone(got[i:j]), slices.Clone(want[i:j])
			slices.SortFunc(a, func(x, y BlobRecord) int { return strings.Compare(key(x), key(y)) })
			slices.SortFunc(b, func(x, y BlobRecord) int { return strings.Compare(key(x), key(y)) })
			if !slices.Equal(a, b) {
				t.Fatalf("%d records: at %d got %+v, want %+v", n, i, a, b)
			}
			i = j
		}
	}
}

// A blob larger than a chunk (a manifest's) is never recorded ahead, even
// when it sorts into the first batch: it is handed back with the last
// batch, for the version's transaction.
func TestRecordAheadHoldsManifestBlobs(t *testing.T) {
	st := newStore(t)
	n := RecordBatch + 3
	recs := make([]BlobRecord, n)
	for i := range recs {
		d := objects.Sum([]byte{byte(i), byte(i >> 8), byte(i >> 16)})
		recs[i] = BlobRecord{Digest: d, Size: 512, Encoding: EncodingPacked, Pack: PackID{1}, Offset: int64(i) * 512}
	}
	slices.SortFunc(recs, compareRecords)
	big := recs[0] // sorts first
	big.Size, big.Encoding, big.Pack, big.Offset = objects.ChunkSize+1, EncodingRaw, PackID{}, 0
	recs[0] = big
	rest, err := st.RecordAhead(recs, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != 3 || rest[len(rest)-1] != big {
		t.Fatalf("handed back %d records, the last %+v; want 3, the last the manifest's blob", len(rest), rest[len(rest)-1])
	}
	err = st.View(func(tx *bolt.Tx) error {
		if _, ok, err := Blob(tx, big.Digest); ok || err != nil {
			t.Fatalf("the manifest's blob was recorded ahead (%v, %v)", ok, err)
		}
		for _, r := range rest[:2] {
			if _, ok, _ := Blob(tx, r.Digest); ok {
				t.Fatalf("a record of the last batch was recorded ahead")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

package store

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/journal"
	"github.com/mstore/mstore/internal/objects"
)

// Encoding says how a blob's bytes are kept on disk. Digests always name
// the raw bytes, so a new encoding never changes a digest or a manifest.
type Encoding byte

const (
	_ Encoding = iota
	// EncodingRaw is one file per blob, objects/ab/<digest>.
	EncodingRaw
	// EncodingPacked is a run of a pack file, objects/packs/<id>.pack:
	// small blobs share packs so that a model of many small tensors costs a
	// few files, not one per tensor.
	EncodingPacked
)

// PackThreshold is the size below which a blob goes into a pack file.
const PackThreshold = 1 << 20

// packTarget is the size at which a pack file is closed and another begun.
const packTarget = 64 << 20

// PackID names a pack file.
type PackID [16]byte

func (p PackID) String() string { return hex.EncodeToString(p[:]) }

// BlobRecord is what the index knows of a blob.
type BlobRecord struct {
	Digest   objects.Digest
	Size     int64
	Encoding Encoding
	Pack     PackID // for EncodingPacked
	Offset   int64  // in the pack, for EncodingPacked
	// Coding says how the bytes are coded (encoding.go); Size is always
	// the raw size, Stored the size on disk of a coded blob.
	Coding Coding
	Stored int64
	Base   objects.Digest // for CodingDelta
	// BaseRec is the record of Base, filled in by Blob, Records and
	// ForEachBlob so that a read needs no index of its own.
	BaseRec *BlobRecord
}

// Record layout: encoding(1) size(8) [pack(16) offset(8)] [coding trailer,
// see appendCoding].
func encodeBlobRecord(r BlobRecord) []byte { return appendBlobRecord(nil, r) }

func appendBlobRecord(b []byte, r BlobRecord) []byte {
	b = binary.BigEndian.AppendUint64(append(b, byte(r.Encoding)), uint64(r.Size))
	if r.Encoding == EncodingPacked {
		b = append(b, r.Pack[:]...)
		b = binary.BigEndian.AppendUint64(b, uint64(r.Offset))
	}
	return appendCoding(b, r)
}

// packedRecordLen is the length of a raw packed blob's record.
const packedRecordLen = 1 + 8 + 16 + 8

func decodeBlobRecord(d objects.Digest, b []byte) (BlobRecord, error) {
	if len(b) < 9 {
		return BlobRecord{}, badRecord(d)
	}
	r := BlobRecord{Digest: d, Encoding: Encoding(b[0]), Size: int64(getU64(b[1:9]))}
	var trailer []byte
	switch {
	case r.Encoding == EncodingRaw:
		trailer = b[9:]
	case r.Encoding == EncodingPacked && len(b) >= 9+16+8:
		copy(r.Pack[:], b[9:25])
		r.Offset = int64(getU64(b[25:33]))
		trailer = b[33:]
	default:
		return BlobRecord{}, badRecord(d)
	}
	if !decodeCoding(&r, trailer) || r.Size < 0 || r.Offset < 0 {
		return BlobRecord{}, badRecord(d)
	}
	return r, nil
}

// badRecord is built only when a record fails: a checkout decodes one
// record per blob, 100,000 for a model of small tensors.
func badRecord(d objects.Digest) error {
	return errs.New(errs.IntegrityError, "store", "blob %s: unreadable index record", d.Short())
}

// RecordBlobs adds records for blobs whose files are durable. A blob already
// recorded keeps its record (its bytes are the same), unless fsck marked it
// suspect (missing or corrupt): then the new copy heals it, its record
// points at the new copy and the mark goes.
func RecordBlobs(tx *bolt.Tx, recs []BlobRecord) error {
	recs = sortedRecords(recs)
	b := tx.Bucket(bucketBlobs)
	suspect := suspectMarks(tx)
	fresh, marked := toRecord(b, suspect, recs)
	if len(fresh) == 0 {
		return nil
	}
	// The journal's records of the new blobs are built on another core
	// while they are put: for 100,000 small blobs, 25-30 ms of the 0.15 s
	// that their transactions took on one.
	journaled := make(chan []journal.Record, 1)
	go func() {
		j := newPackJournal(fresh)
		for _, r := range fresh {
			j.add(r)
		}
		journaled <- j.records()
	}()
	err := putRecords(b, suspect, fresh, marked)
	jrecs := <-journaled
	if err != nil {
		return err
	}
	return journal.AddAll(tx, jrecs)
}

// toRecord returns the records of recs (in key order) that RecordBlobs
// puts: each digest once, not yet recorded or marked suspect; and the
// marked ones. recs itself when that is all of them (an add's blobs are
// new), so that 100,000 records are not copied.
func toRecord(b, suspect *bolt.Bucket, recs []BlobRecord) (fresh []BlobRecord, marked []objects.Digest) {
	c := b.Cursor()
	var k []byte
	copied := false // fresh holds the records kept; until a skip, recs[:i] all are
	for i, r := range recs {
		isMarked := suspect != nil && suspect.Get(r.Digest[:]) != nil
		// recs are in key order: one cursor walks the index with them.
		if i == 0 || k != nil && bytes.Compare(k, r.Digest[:]) < 0 {
			k, _ = c.Seek(r.Digest[:])
		}
		twice := i > 0 && r.Digest == recs[i-1].Digest
		if twice || bytes.Equal(k, r.Digest[:]) && !isMarked {
			if !copied {
				fresh, copied = slices.Clone(recs[:i]), true
			}
			continue
		}
		if isMarked {
			marked = append(marked, r.Digest)
		}
		if copied {
			fresh = append(fresh, r)
		}
	}
	if !copied {
		fresh = recs
	}
	return fresh, marked
}

// putRecords puts fresh (in key order) and clears the marks of marked.
func putRecords(b, suspect *bolt.Bucket, fresh []BlobRecord, marked []objects.Digest) error {
	for _, d := range marked {
		if err := suspect.Delete(d[:]); err != nil {
			return fmt.Errorf("store: clear suspect mark: %w", err)
		}
	}
	appendOnly(b, b.Cursor(), fresh[0].Digest)
	// The records' values, cut from one buffer: bbolt keeps each until the
	// transaction ends, and 100,000 of them were 400,000 allocations.
	vals := make([]byte, 0, len(fresh)*packedRecordLen)
	for _, r := range fresh {
		start := len(vals)
		vals = appendBlobRecord(vals, r)
		if err := b.Put(r.Digest[:], vals[start:len(vals):len(vals)]); err != nil {
			return fmt.Errorf("store: record blob: %w", err)
		}
	}
	return nil
}

// appendOnly fills the index's pages whole when every key to be put
// sorts after those it holds (the first add into a store, and each batch
// of RecordAhead after the first): bbolt splits a node at FillPercent, by
// default half a page, which left the blob records of a 100,000-tensor add
// on 4,000 half-empty pages (16 MB written for 8 MB). Keys put among
// others keep the default, so that a full page that takes one more key is
// not split into a full one and an almost empty one.
func appendOnly(b *bolt.Bucket, c *bolt.Cursor, first objects.Digest) {
	if last, _ := c.Last(); last == nil || bytes.Compare(first[:], last) > 0 {
		b.FillPercent = 1
	}
}

// RecordBatch is the most blob records RecordAhead puts in one
// transaction: what a transaction holds until it commits (bbolt's dirty
// nodes, the journal records pending, about 300 B a record) stays about
// 20 MB whatever the model, where a model of 100,000 small tensors made
// one transaction of 60 MB. Each batch costs a commit (three syncs): a
// model of 19,500 tensors (a MoE's experts) adds in one transaction, 30
// ms sooner than in two with batches of 16,384, and one of 100,000 in
// two, 20 ms sooner than in four with batches of 32,768 (peak RSS within
// the noise, 113-128 MiB).
const RecordBatch = 1 << 16

// rangeIndexBytes is about how much of the index one transaction of
// RecordAhead reaches into: its batches also split the key space into
// ranges of about this much of the index each. Digests are spread evenly,
// so in an index that holds many blobs a batch of new ones cut by count
// alone lands on most of its pages, and the next batch on most of them
// again: bbolt copies each page a transaction changes, holds the copies
// until it commits, and writes them whole. An add of 100,000 new blobs to
// a store of 1.6 million (an index of 308 MB), three runs each:
//
//	batches                   time        peak RSS
//	two, by count             1.6-2.0 s   660 MB
//	by ranges of 64 MB        1.6-1.9 s   350-370 MB
//	by ranges of 32 MB        1.5-1.7 s   245-255 MB
//	by ranges of 16 MB (20)   1.5-1.7 s   215-230 MB
//
// (the ranges with KnownBlobs no longer holding the whole index mapped).
// An index under this size is one range: a store's first adds are
// batched by count only.
var rangeIndexBytes int64 = 16 << 20

// RecordAhead records recs (blobs whose files are durable) in transactions
// of at most RecordBatch records, each within one range of the key space
// (rangeIndexBytes), all but the last batch, which it returns: the caller
// records that one in the transaction that commits its version, so a
// version of few blobs is still one transaction. A crash between two
// batches leaves recorded blobs that no version needs yet, which gc
// removes (the caller holds the store's shared lock until its commit, so
// gc never removes them from under it). It sorts recs in place: the
// records of a large model are never copied to be put in key order.
//
// A blob larger than a chunk (only a manifest's can be) is never recorded
// ahead: the version's transaction records it with its manifest. Recorded
// alone, it is one that fsck calls corrupt, and an add or pull killed
// between two batches left such a store when its manifest's digest sorted
// into an early batch.
func (s *Store) RecordAhead(recs []BlobRecord, failpoint string) ([]BlobRecord, error) {
	sortByDigest(recs)
	var held []BlobRecord
	recs = slices.DeleteFunc(recs, func(r BlobRecord) bool {
		if r.Size > objects.ChunkSize {
			held = append(held, r)
			return true
		}
		return false
	})
	all := Batches(s, recs, recordDigest)
	if len(all) <= 1 {
		return append(recs, held...), nil // one batch: the version's
	}
	for _, batch := range all[:len(all)-1] {
		if err := s.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, batch) }); err != nil {
			return nil, err
		}
		Failpoint(failpoint)
	}
	// A copy: the records recorded (12 MB for 100,000 blobs) are not kept
	// alive by the last batch's slice of them.
	return append(slices.Clone(all[len(all)-1]), held...), nil
}

// RecordInBatches records recs (blobs whose files are durable) in
// RecordAhead's batches, the last one too: a pull's rounds, each recorded
// before the next is fetched.
func (s *Store) RecordInBatches(recs []BlobRecord) error {
	rest, err := s.RecordAhead(recs, "")
	if err == nil && len(rest) > 0 {
		err = s.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, rest) })
	}
	return err
}

// Batches cuts items, in key order (digest gives each one's key), into
// batches as RecordAhead records them: at most RecordBatch each, each in
// one range of the key space.
func Batches[T any](s *Store, items []T, digest func(*T) objects.Digest) [][]T {
	var out [][]T
	start := 0
	b := s.NewBatcher()
	for i := range items {
		if b.Starts(digest(&items[i])) && i > start {
			out = append(out, items[start:i:i])
			start = i
		}
	}
	if start < len(items) {
		out = append(out, items[start:len(items):len(items)])
	}
	return out
}

// Batcher cuts keys that come in key order into the batches Batches makes,
// one at a time: for a list made in order that is also removed in batches
// (gc's dead records), which is then kept as its batches, never copied to
// grow as one.
type Batcher struct {
	ranges uint64
	first  uint64 // the key range of the batch's first key
	n      int    // keys in the batch
}

// NewBatcher starts cutting batches for s's index.
func (s *Store) NewBatcher() *Batcher { return &Batcher{ranges: s.keyRanges()} }

// Starts takes the next key, d, and reports whether it starts a new batch
// (the first key does).
func (b *Batcher) Starts(d objects.Digest) bool {
	r := keyRange(d, b.ranges)
	if b.n == 0 || b.n == RecordBatch || r != b.first {
		b.first, b.n = r, 1
		return true
	}
	b.n++
	return false
}

// keyRanges is how many ranges of the key space RecordAhead cuts its
// batches by: one for each rangeIndexBytes of the index.
func (s *Store) keyRanges() uint64 {
	fi, err := os.Stat(filepath.Join(s.dir, indexFile))
	if err != nil {
		return 1 // a hint only: batches by count still bound a transaction
	}
	return uint64(max(1, (fi.Size()+rangeIndexBytes-1)/rangeIndexBytes))
}

// recordDigest is a record's key, for Batches.
func recordDigest(r *BlobRecord) objects.Digest { return r.Digest }

// keyRange is which of ranges equal ranges of the key space d is in.
func keyRange(d objects.Digest, ranges uint64) uint64 {
	return uint64(binary.BigEndian.Uint32(d[:4])) * ranges >> 32
}

// packJournal gathers the journal records of packed blobs: where each
// lies, since a pack file has no table of its own and `fsck
// --rebuild-index` needs one. A loose blob file is named by its digest and
// needs nothing. Raw blobs go many to a record (journal.PackRuns), coded
// ones one each, with their coding.
type packJournal struct {
	coded   []journal.Record
	members map[PackID][]journal.PackMember
	packs   []PackID // in the order first seen
}

// newPackJournal has room for the raw packed blobs of recs.
func newPackJournal(recs []BlobRecord) *packJournal {
	n := map[PackID]int{}
	for _, r := range recs {
		if r.Encoding == EncodingPacked && !r.Coded() {
			n[r.Pack]++
		}
	}
	j := &packJournal{members: make(map[PackID][]journal.PackMember, len(n))}
	for id, c := range n {
		j.members[id] = make([]journal.PackMember, 0, c)
	}
	return j
}

func (j *packJournal) add(r BlobRecord) {
	if r.Encoding != EncodingPacked {
		return
	}
	if r.Coded() {
		// The rebuild decodes it (with its base, for a delta) to check it.
		j.coded = append(j.coded, journal.Record{Op: journal.OpPacked, Digest: r.Digest, Pack: r.Pack.String(), Offset: r.Offset,
			Size: r.StoredSize(), Enc: r.Coding.String(), Raw: r.Size, Base: r.Base})
		return
	}
	if len(j.members[r.Pack]) == 0 {
		j.packs = append(j.packs, r.Pack)
	}
	j.members[r.Pack] = append(j.members[r.Pack], journal.PackMember{Digest: r.Digest, Offset: r.Offset, Size: r.StoredSize()})
}

// records is what was gathered, as journal records.
func (j *packJournal) records() []journal.Record {
	out := j.coded
	for _, id := range j.packs {
		out = append(out, journal.PackRuns(id.String(), j.members[id])...)
	}
	return out
}

// MarkSuspect replaces the set of blobs fsck found missing or corrupt by
// bad: an add rewrites such a blob from its source instead of trusting the
// copy the store has (KnownBlobs leaves them out).
func MarkSuspect(tx *bolt.Tx, bad map[objects.Digest]string) error {
	if tx.Bucket(bucketSuspect) != nil {
		if err := tx.DeleteBucket(bucketSuspect); err != nil {
			return fmt.Errorf("store: suspect blobs: %w", err)
		}
	}
	b, err := tx.CreateBucket(bucketSuspect)
	if err != nil {
		return fmt.Errorf("store: suspect blobs: %w", err)
	}
	for _, d := range sortedDigests(bad) {
		if err := b.Put(d[:], []byte(bad[d])); err != nil {
			return fmt.Errorf("store: suspect blobs: %w", err)
		}
	}
	return nil
}

// suspectMarks is the bucket of fsck's suspect marks, or nil when it holds
// none (as it almost always does): a walk of many records then asks it
// nothing, where it asked an empty bucket once a record (100,000 look-ups
// in an add of as many small tensors, 20 of the 170 ms of its records).
func suspectMarks(tx *bolt.Tx) *bolt.Bucket {
	b := tx.Bucket(bucketSuspect)
	if b == nil {
		return nil
	}
	if k, _ := b.Cursor().First(); k == nil {
		return nil
	}
	return b
}

// Suspect returns the blobs fsck last marked missing or corrupt and not yet
// healed, with why.
func Suspect(tx *bolt.Tx) map[objects.Digest]string {
	out := map[objects.Digest]string{}
	if b := tx.Bucket(bucketSuspect); b != nil {
		b.ForEach(func(k, v []byte) error {
			out[objects.Digest(k)] = string(v)
			return nil
		})
	}
	return out
}

// Blob returns the index record of blob d.
func Blob(tx *bolt.Tx, d objects.Digest) (BlobRecord, bool, error) {
	v := tx.Bucket(bucketBlobs).Get(d[:])
	if v == nil {
		return BlobRecord{}, false, nil
	}
	r, err := decodeBlobRecord(d, v)
	if err == nil {
		err = attachBase(tx, &r)
	}
	return r, err == nil, err
}

// releaseEvery is how many records a walk of the index reads between two
// releases of its pages (releaseIndexPages): about 2 MB of them.
const releaseEvery = 1 << 14

// releaseAt releases the index pages a walk of tx has read once it has
// read n records, at every releaseEvery-th. A walk of every record (fsck,
// gc, du) or of most (a checkout of 100,000 blobs from a store of 700,000)
// otherwise keeps the whole index resident: 90 MB of gc's 180 MB peak for
// a store of 700,000 blobs.
func releaseAt(tx *bolt.Tx, n int) {
	if n > 0 && n%releaseEvery == 0 {
		releaseIndexPages(tx)
	}
}

// releasing releases the index pages tx has read every releaseInterval,
// from another goroutine, until stop is called: for bbolt's check, which
// reads every page of the index in a goroutine of its own and has no hook
// to release them as it goes. (The mapping is read-only and shared: a page
// released while the check reads it is mapped again, the same bytes, from
// the page cache.)
func releasing(tx *bolt.Tx) (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(releaseInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				releaseIndexPages(tx)
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// releaseInterval is how often releasing releases the pages read: bbolt's
// check maps a warm index at about 4 GB/s here (200 of the 308 MB of a
// store of 1.6 million blobs within 50 ms, released every 10 ms), 4 MB
// between two releases.
const releaseInterval = time.Millisecond

// releaseLookupsEvery is how many look-ups in key order (RecordsInOrder)
// read between two releases of the index pages: each of a few blobs
// among many is on a page of its own, so releaseEvery of them was 64 MB of
// pages. A checkout of 100,000 blobs from a store of 1.6 million peaked at
// 151 MB RSS, 97 of it mapped files, with releases every 16,384 look-ups;
// 93 MB with every 2,048, and as fast (0.33-0.44 s against 0.36-0.51).
const releaseLookupsEvery = 1 << 11

// ForEachBlob calls fn for every recorded blob, releasing the index pages
// it has read as it goes (releaseAt).
func ForEachBlob(tx *bolt.Tx, fn func(BlobRecord) error) error {
	n := 0
	return tx.Bucket(bucketBlobs).ForEach(func(k, v []byte) error {
		n++
		releaseAt(tx, n)
		r, err := decodeBlobRecord(objects.Digest(k), v)
		if err != nil {
			return err
		}
		if err := attachBase(tx, &r); err != nil {
			return err
		}
		return fn(r)
	})
}

// RecordPrint is what gc keeps of a blob record it removes: the digest,
// the raw size and a fingerprint of the record as the index holds it (48
// bytes and no pointer, where a BlobRecord is 128 with one: a gc that frees
// 800,000 blobs held 108 MB of records).
type RecordPrint struct {
	Digest objects.Digest
	Size   int64
	print  uint64
}

// PrintOf is r's print.
func PrintOf(r BlobRecord) RecordPrint {
	var buf [128]byte
	return RecordPrint{Digest: r.Digest, Size: r.Size, print: fingerprint(appendBlobRecord(buf[:0], r))}
}

// fingerprint hashes a record's encoding (hash/maphash: a print is only
// compared within the process that made it).
func fingerprint(v []byte) uint64 { return maphash.Bytes(printSeed, v) }

var printSeed = maphash.MakeSeed()

// RemoveBlobRecords deletes the records prints name (gc's sweep; in key
// order, as bbolt deletes best). Each must still be recorded as printed: a
// record that changed since gc read it means that someone else wrote to
// the store, and nothing is deleted.
func RemoveBlobRecords(tx *bolt.Tx, prints []RecordPrint) error {
	b, suspect := tx.Bucket(bucketBlobs), suspectMarks(tx)
	for _, p := range prints {
		if v := b.Get(p.Digest[:]); v == nil || fingerprint(v) != p.print {
			return errs.New(errs.Conflict, "store", "the record of blob %s changed while gc ran; run gc again", p.Digest.Short())
		}
		if err := b.Delete(p.Digest[:]); err != nil {
			return fmt.Errorf("store: remove blob record: %w", err)
		}
		if suspect != nil {
			if err := suspect.Delete(p.Digest[:]); err != nil {
				return fmt.Errorf("store: remove blob record: %w", err)
			}
		}
	}
	return nil
}

// ReplaceBlobRecords points recorded blobs at new copies of their bytes
// (gc's repack). Each old record must still be recorded as it was, and
// each new one must name the same digest and size as an old one.
func ReplaceBlobRecords(tx *bolt.Tx, old map[objects.Digest]BlobRecord, recs []BlobRecord) error {
	recs = sortedRecords(recs)
	b := tx.Bucket(bucketBlobs)
	j := newPackJournal(recs)
	for _, r := range recs {
		o, ok := old[r.Digest]
		if !ok || o.Size != r.Size {
			return fmt.Errorf("store: replace blob record %s: no old record of %d bytes", r.Digest.Short(), r.Size)
		}
		if err := sameRecord(b, o); err != nil {
			return err
		}
		if err := b.Put(r.Digest[:], encodeBlobRecord(r)); err != nil {
			return fmt.Errorf("store: replace blob record: %w", err)
		}
		j.add(r)
	}
	return journal.AddAll(tx, j.records())
}

func sameRecord(b *bolt.Bucket, r BlobRecord) error {
	if !bytes.Equal(b.Get(r.Digest[:]), encodeBlobRecord(r)) {
		return errs.New(errs.Conflict, "store", "the record of blob %s changed while gc ran; run gc again", r.Digest.Short())
	}
	return nil
}

// sortedRecords returns recs in digest order: bbolt inserts into a node by
// shifting it until the commit splits it, so keys in order are cheap.
// Records already in order (BlobWriter.Commit's) are not copied.
func sortedRecords(recs []BlobRecord) []BlobRecord {
	if slices.IsSortedFunc(recs, compareRecords) {
		return recs
	}
	recs = slices.Clone(recs)
	sortByDigest(recs)
	return recs
}

func compareRecords(a, b BlobRecord) int { return bytes.Compare(a.Digest[:], b.Digest[:]) }

// sortByDigest sorts recs in key order, in place: it orders their indexes
// (objects.DigestOrder) and moves each record once. A sort that swaps the
// records themselves (136 bytes each) took 44 ms for the 100,000 of an add
// of as many small tensors.
func sortByDigest(recs []BlobRecord) {
	if slices.IsSortedFunc(recs, compareRecords) {
		return
	}
	// Position j takes the record at from[j].
	from := objects.DigestOrder(len(recs), func(i int) *objects.Digest { return &recs[i].Digest })
	// Follow each cycle of the permutation once, marking a place done by
	// pointing it at itself.
	for first := range from {
		if from[first] == first {
			continue
		}
		held := recs[first]
		j := first
		for {
			k := from[j]
			from[j] = j
			if k == first {
				recs[j] = held
				break
			}
			recs[j] = recs[k]
			j = k
		}
	}
}

package store

import (
	"cmp"
	"encoding/binary"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/prefault"
)

// RecordsInOrder returns the records of the blobs ds in their order
// (out[i] is ds[i]'s; a digest may repeat), a delta's with its base's
// attached. It is LookupRecords without the map: a checkout of 100,000
// small tensors looks up 100,000 blobs, and a map of them costs more
// than the index walk (walkInOrder).
func RecordsInOrder(tx *bolt.Tx, ds []objects.Digest) ([]BlobRecord, error) {
	out := make([]BlobRecord, len(ds))
	prefault.Slice(out)
	err := walkInOrder(tx, ds, func(i int, r *BlobRecord) { out[i] = *r })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RecordTable is the records of blobs looked up in order
// (RecordTableInOrder), kept as a checkout holds them through its writes:
// 24 bytes a plain blob (no digest: the caller has it), the few coded
// ones whole. For 100,000 small tensors, 2.4 MB where BlobRecords took
// 13.6.
type RecordTable struct {
	plain []tableRecord
	packs []PackID
	coded []BlobRecord
}

// tableRecord is a blob's record: pack is 1 + its pack's index in
// RecordTable.packs, 0 for a blob file of its own; or -1 for a coded blob,
// whose whole record is RecordTable.coded[offset].
type tableRecord struct {
	size, offset int64
	pack         int32
}

// RecordTableInOrder is RecordsInOrder, as a RecordTable.
func RecordTableInOrder(tx *bolt.Tx, ds []objects.Digest) (*RecordTable, error) {
	t := &RecordTable{plain: make([]tableRecord, len(ds))}
	prefault.Slice(t.plain)
	packs := map[PackID]int32{}
	err := walkInOrder(tx, ds, func(i int, r *BlobRecord) {
		switch {
		case r.Coded():
			t.coded = append(t.coded, *r)
			t.plain[i] = tableRecord{size: r.Size, offset: int64(len(t.coded) - 1), pack: -1}
		case r.Encoding == EncodingPacked:
			p, ok := packs[r.Pack]
			if !ok {
				t.packs = append(t.packs, r.Pack)
				p = int32(len(t.packs))
				packs[r.Pack] = p
			}
			t.plain[i] = tableRecord{size: r.Size, offset: r.Offset, pack: p}
		default:
			t.plain[i] = tableRecord{size: r.Size}
		}
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Len is how many records t holds.
func (t *RecordTable) Len() int { return len(t.plain) }

// At is the record of the i-th digest looked up, d.
func (t *RecordTable) At(i int, d objects.Digest) BlobRecord {
	r := t.plain[i]
	switch {
	case r.pack < 0:
		return t.coded[r.offset]
	case r.pack > 0:
		return BlobRecord{Digest: d, Size: r.size, Encoding: EncodingPacked, Pack: t.packs[r.pack-1], Offset: r.offset}
	default:
		return BlobRecord{Digest: d, Size: r.size, Encoding: EncodingRaw}
	}
}

// walkInOrder gives fn the record of each of ds, with its index in ds: in
// key order, a repeated digest's record again. The walk is one cursor; the
// digests are put in key order by their first 8 bytes (a full comparison
// only on a tie), which sorts several times faster than 32-byte
// comparisons.
func walkInOrder(tx *bolt.Tx, ds []objects.Digest, fn func(i int, r *BlobRecord)) error {
	type key struct {
		prefix uint64
		i      int32
	}
	keys := make([]key, len(ds))
	for i := range ds {
		keys[i] = key{binary.BigEndian.Uint64(ds[i][:8]), int32(i)}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := cmp.Compare(a.prefix, b.prefix); c != 0 {
			return c
		}
		return objects.CompareDigests(ds[a.i], ds[b.i])
	})
	c := recordCursor{c: tx.Bucket(bucketBlobs).Cursor()}
	var r BlobRecord
	for n, k := range keys {
		if n > 0 && n%releaseLookupsEvery == 0 {
			releaseIndexPages(tx) // the index pages read so far
		}
		d := ds[k.i]
		if n > 0 && ds[keys[n-1].i] == d {
			fn(int(k.i), &r)
			continue
		}
		v, err := c.find(d)
		if err != nil {
			return err
		}
		r, err = decodeBlobRecord(d, v)
		if err == nil {
			err = attachBase(tx, &r) // a delta's read needs its base's record
		}
		if err != nil {
			return err
		}
		fn(int(k.i), &r)
	}
	return nil
}

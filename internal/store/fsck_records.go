package store

import (
	"math"
	"slices"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/objects"
)

// fsckRecord is a blob record as fsck holds it until its end: 48 bytes,
// where a map of whole BlobRecords took about 240 a record (136 and the
// map's), 170 MB of fsck's 540-575 MiB peak on a store of 700,000 blobs. The
// pack is an index into fsckRecords.packs, a delta's base is kept apart
// (fsckRecords.bases): most blobs are not deltas. So are the sizes and the
// offset of a coded blob, or of one whose values do not fit 32 bits
// (fsckRecords.wide): a plain blob is under a chunk, and its pack not much
// larger. With 64-bit fields in every record (64 bytes), the records of a
// store of 1.6 million blobs were 102 MB of fsck's 171 MB peak RSS.
type fsckRecord struct {
	digest objects.Digest
	// size and offset (in its pack, for EncodingPacked), or, when wide,
	// size is the index of the record's values in fsckRecords.wide.
	size, offset uint32
	pack         uint32
	enc          Encoding
	coding       Coding
	wide         bool
}

// fsckWide is a record's values that a fsckRecord does not hold.
type fsckWide struct{ size, offset, stored int64 }

// fsckRecords is every blob record the index holds (that decodes), in key
// order, so that a digest is found by binary search.
type fsckRecords struct {
	list  []fsckRecord
	wide  []fsckWide
	packs []PackID
	bases []fsckBase // in the order of their deltas
	// start[p] is the first record whose digest begins with the two
	// bytes p (and start[p+1] the end): a search of 700,000 records
	// narrows to about ten before it compares a digest. 700,000 finds
	// took 14 ms so, 74 ms by binary search alone (a map: 57 ms).
	start []uint32
}

// fsckBase is the base of delta list[i].
type fsckBase struct {
	i    uint32
	base objects.Digest
}

// countKeys is how many keys b holds, its pages released as they are read.
func countKeys(b *bolt.Bucket) int {
	n := 0
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
		releaseAt(b.Tx(), n)
	}
	return n
}

// readRecords copies the blob records of the bucket b out of its
// transaction, those keep keeps (it is given each key, as a digest, and
// the record decoded from its value or why it does not decode).
func readRecords(b *bolt.Bucket, keep func(k []byte, d objects.Digest, rec BlobRecord, err error) bool) (*fsckRecords, error) {
	// Room for every record at once (counting them takes 11-45 ms for
	// 700,000): a list grown by append would copy 45 MB of records into
	// one 1.25 times as long at its last growth. Counted by a walk that
	// releases the pages it reads: bbolt's Stats kept all of them mapped,
	// 200 MB of fsck's peak RSS of 222 MB for an index of 308 MB.
	recs := &fsckRecords{list: make([]fsckRecord, 0, countKeys(b))}
	packs := map[PackID]uint32{}
	err := b.ForEach(func(k, v []byte) error {
		d := objects.Digest(k)
		rec, err := decodeBlobRecord(d, v)
		if !keep(k, d, rec, err) {
			return nil
		}
		var p uint32
		if rec.Encoding == EncodingPacked {
			var ok bool
			if p, ok = packs[rec.Pack]; !ok {
				p = uint32(len(recs.packs))
				packs[rec.Pack] = p
				recs.packs = append(recs.packs, rec.Pack)
			}
		}
		if rec.Coding == CodingDelta {
			recs.bases = append(recs.bases, fsckBase{i: uint32(len(recs.list)), base: rec.Base})
		}
		r := fsckRecord{digest: d, size: uint32(rec.Size), offset: uint32(rec.Offset), pack: p, enc: rec.Encoding, coding: rec.Coding}
		if rec.Coding.coded() || uint64(rec.Size) > math.MaxUint32 || uint64(rec.Offset) > math.MaxUint32 {
			r.wide, r.size, r.offset = true, uint32(len(recs.wide)), 0
			recs.wide = append(recs.wide, fsckWide{size: rec.Size, offset: rec.Offset, stored: rec.Stored})
		}
		recs.list = append(recs.list, r)
		releaseAt(b.Tx(), len(recs.list))
		return nil
	})
	recs.start = make([]uint32, 1<<16+1)
	p := 0
	for i := range recs.list {
		for q := prefix(&recs.list[i].digest); p <= q; p++ {
			recs.start[p] = uint32(i)
		}
	}
	for ; p < len(recs.start); p++ {
		recs.start[p] = uint32(len(recs.list))
	}
	return recs, err
}

func prefix(d *objects.Digest) int { return int(d[0])<<8 | int(d[1]) }

// find returns the index of d's record.
func (recs *fsckRecords) find(d objects.Digest) (int, bool) {
	p := prefix(&d)
	lo, hi := int(recs.start[p]), int(recs.start[p+1])
	i, ok := slices.BinarySearchFunc(recs.list[lo:hi], d, func(r fsckRecord, d objects.Digest) int { return objects.CompareDigests(r.digest, d) })
	return lo + i, ok
}

// record returns list[i] as the index holds it (BaseRec not filled in).
func (recs *fsckRecords) record(i int) BlobRecord {
	r := &recs.list[i]
	rec := BlobRecord{Digest: r.digest, Size: recs.size(i), Encoding: r.enc, Offset: recs.offset(i), Coding: r.coding}
	if r.wide {
		rec.Stored = recs.wide[r.size].stored
	}
	if r.enc == EncodingPacked {
		rec.Pack = recs.packs[r.pack]
	}
	if r.coding == CodingDelta {
		j := sort.Search(len(recs.bases), func(j int) bool { return recs.bases[j].i >= uint32(i) })
		rec.Base = recs.bases[j].base
	}
	return rec
}

// size is list[i]'s raw size.
func (recs *fsckRecords) size(i int) int64 {
	if r := &recs.list[i]; r.wide {
		return recs.wide[r.size].size
	}
	return int64(recs.list[i].size)
}

// offset is list[i]'s offset in its pack.
func (recs *fsckRecords) offset(i int) int64 {
	if r := &recs.list[i]; r.wide {
		return recs.wide[r.size].offset
	}
	return int64(recs.list[i].offset)
}

// storedSize is the bytes list[i] takes on disk.
func (recs *fsckRecords) storedSize(i int) int64 {
	if r := &recs.list[i]; r.coding.coded() {
		return recs.wide[r.size].stored
	}
	return recs.size(i)
}

// bitset is a set of record indexes.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) set(i int)      { b[i/64] |= 1 << (i % 64) }
func (b bitset) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }

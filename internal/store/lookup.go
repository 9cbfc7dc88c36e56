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
// than the index walk. The walk is one cursor in key order; the digests
// are put in that order by their first 8 bytes (a full comparison only
// on a tie), which sorts several times faster than 32-byte comparisons.
func RecordsInOrder(tx *bolt.Tx, ds []objects.Digest) ([]BlobRecord, error) {
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
	out := make([]BlobRecord, len(ds))
	prefault.Slice(out)
	c := recordCursor{c: tx.Bucket(bucketBlobs).Cursor()}
	for n, k := range keys {
		if n > 0 && n%releaseLookupsEvery == 0 {
			releaseIndexPages(tx) // the index pages read so far
		}
		d := ds[k.i]
		if n > 0 && ds[keys[n-1].i] == d {
			out[k.i] = out[keys[n-1].i]
			continue
		}
		v, err := c.find(d)
		if err != nil {
			return nil, err
		}
		r, err := decodeBlobRecord(d, v)
		if err == nil {
			err = attachBase(tx, &r) // a delta's read needs its base's record
		}
		if err != nil {
			return nil, err
		}
		out[k.i] = r
	}
	return out, nil
}

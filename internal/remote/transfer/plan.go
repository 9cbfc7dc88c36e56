package transfer

import (
	"slices"

	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
)

// smallBlob is the size under which blobs travel many to a request: a
// model of 100,000 small tensors is then a few hundred requests, not
// 100,000.
const smallBlob = 1 << 20

// batchBytes bounds the bytes of one batch of small blobs.
const batchBytes = 8 << 20

// job is one request's worth of blobs.
type job struct {
	blobs []objects.Digest
	bytes int64
	batch bool // many small blobs in one request
}

// planJobs groups ds: each large blob alone, small ones in batches.
func planJobs(ds []objects.Digest, sizes map[objects.Digest]int64) []job {
	var out []job
	var cur job
	for _, d := range ds {
		n := sizes[d]
		if n >= smallBlob {
			out = append(out, job{blobs: []objects.Digest{d}, bytes: n})
			continue
		}
		if len(cur.blobs) > 0 && (cur.bytes+n > batchBytes || len(cur.blobs) >= remote.MaxBatchBlobs) {
			out = append(out, cur)
			cur = job{}
		}
		cur.blobs = append(cur.blobs, d)
		cur.bytes += n
		cur.batch = true
	}
	if len(cur.blobs) > 0 {
		out = append(out, cur)
	}
	return out
}

// rounds cuts jobs into runs of about limit bytes: a pull makes each run
// durable and records it before starting the next, so an interrupted pull
// keeps what it fetched.
func rounds(jobs []job, limit int64) [][]job {
	var out [][]job
	var cur []job
	var n int64
	for _, j := range jobs {
		if len(cur) > 0 && n+j.bytes > limit {
			out = append(out, cur)
			cur, n = nil, 0
		}
		cur = append(cur, j)
		n += j.bytes
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// inManifestOrder returns ds (in digest order, as Manifest.Blobs gives
// them) in the order m first names them. The add that stored the model
// wrote its blobs in that order, so a pull's batch of small blobs is a few
// runs of the remote's packs, each one read (store.BlobReader.ReadRaw),
// where digest order made every blob a read of its own; and this store's
// packs keep them in that order too, for its checkouts. The manifest's
// digests are put in digest order (objects.DigestOrder) and walked beside
// ds: a binary search of ds for each took 60 ms for 100,000.
func inManifestOrder(m *objects.Manifest, ds []objects.Digest) []objects.Digest {
	all := m.AppendBlobs(nil)
	order := objects.DigestOrder(len(all), func(i int) *objects.Digest { return &all[i] })
	first := make([]int, 0, len(ds)) // where each of ds is first named
	j := 0
	for k := 0; k < len(order) && j < len(ds); {
		d, at := all[order[k]], order[k]
		for k++; k < len(order) && all[order[k]] == d; k++ {
			at = min(at, order[k]) // equal digests come in any order
		}
		for j < len(ds) && objects.CompareDigests(ds[j], d) < 0 {
			j++ // not named by m: not fetched
		}
		if j < len(ds) && ds[j] == d {
			first = append(first, at)
			j++
		}
	}
	slices.Sort(first)
	out := make([]objects.Digest, len(first))
	for i, at := range first {
		out[i] = all[at]
	}
	return out
}

package transfer

import (
	"context"
	"runtime"
	"slices"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/remote/pathremote"
	"github.com/mstore/mstore/internal/store"
)

// Blobs kept coded (byte-grouped, or XOR deltas) move coded when both ends
// know the coding (remote.Coder): fewer bytes cross the network, and the
// receiver decodes each and checks its raw digest before it stores it,
// coded. A remote that knows none, or a delta whose base the receiver
// lacks, falls back to raw bytes.

// decoding bounds the blobs decoded at once: each holds its raw bytes (and
// a delta its base's) beside the coded ones, and more at once than CPUs
// only costs memory.
var decoding = make(chan struct{}, runtime.GOMAXPROCS(0))

// coderOf returns r's Coder and the codings both ends know, or nil.
func coderOf(r remote.Remote) (remote.Coder, []string) {
	c, ok := r.(remote.Coder)
	if !ok {
		return nil, nil
	}
	var both []string
	for _, k := range c.Codings() {
		if slices.Contains(pathremote.StoreCodings(), k) {
			both = append(both, k)
		}
	}
	if len(both) == 0 {
		return nil, nil
	}
	return c, both
}

// fetchCoded fetches the blobs of j as the remote keeps them, checks each
// (size from the manifest, raw digest after decoding) and writes it to w
// as it came. Deltas whose base st lacks are fetched again raw. It returns
// the bytes that crossed the network.
func fetchCoded(ctx context.Context, st *store.Store, c remote.Coder, accept []string, r remote.Remote, j job, sizes map[objects.Digest]int64, w *store.BlobWriter) (int64, error) {
	blobs, buf, err := getCoded(ctx, c, accept, j)
	if buf != nil {
		defer putBuffer(buf) // written, or refused: no longer needed
	}
	if err == nil && len(blobs) != len(j.blobs) {
		err = errs.New(errs.IntegrityError, "pull", "the remote sent %d blobs for %d asked", len(blobs), len(j.blobs))
	}
	if err != nil {
		return 0, err
	}
	var wire int64
	for i, b := range blobs {
		wire += int64(len(b.Data))
		if b.Digest != j.blobs[i] || b.Size != sizes[b.Digest] {
			return 0, errs.New(errs.IntegrityError, "pull", "blob %s from the remote: %d bytes raw, its manifest says %d; nothing of this version was recorded", j.blobs[i].Short(), b.Size, sizes[j.blobs[i]])
		}
	}
	decoding <- struct{}{} // decoding is CPU work: as many at once as CPUs, not as requests
	recs, raw, err := pathremote.CheckCoded(st, blobs)
	<-decoding
	if err != nil {
		return 0, errs.Wrap(errs.ClassOf(err), "pull", err, "nothing of this version was recorded")
	}
	for i, rec := range recs {
		if !rec.Digest.IsZero() {
			if _, err := w.PutStored(rec, blobs[i].Data); err != nil {
				return 0, err
			}
		}
	}
	if len(raw) == 0 {
		return wire, nil
	}
	ds := make([]objects.Digest, len(raw))
	for k, i := range raw {
		ds[k] = blobs[i].Digest
	}
	data, err := r.GetBlobs(ctx, ds)
	if err == nil && len(data) != len(ds) {
		err = errs.New(errs.IntegrityError, "pull", "the remote sent %d blobs for %d asked", len(data), len(ds))
	}
	if err == nil {
		err = checkBlobs(ds, sizes, data)
	}
	for k := 0; err == nil && k < len(ds); k++ {
		wire += int64(len(data[k]))
		_, err = w.Put(ds[k], data[k])
	}
	return wire, err
}

// getCoded is c.GetCoded of j's blobs, a large one read into a pooled
// buffer when c can (remote.CoderInto): buf, for the caller to put back
// once it has written the blob.
func getCoded(ctx context.Context, c remote.Coder, accept []string, j job) (blobs []remote.CodedBlob, buf *[]byte, err error) {
	ci, ok := c.(remote.CoderInto)
	if !ok || j.batch {
		blobs, err = c.GetCoded(ctx, j.blobs, accept)
		return blobs, nil, err
	}
	buf = getBuffer()
	b, err := ci.GetCodedInto(ctx, j.blobs[0], accept, *buf)
	return []remote.CodedBlob{b}, buf, err
}

// remoteBases returns which delta bases of the blobs to send r has: a
// delta is sent coded only against a base the receiver holds already.
func remoteBases(ctx context.Context, r remote.Remote, ds []objects.Digest, recs map[objects.Digest]store.BlobRecord) (map[objects.Digest]bool, error) {
	var bases []objects.Digest
	seen := map[objects.Digest]bool{}
	for _, d := range ds {
		if rec := recs[d]; rec.Coding == store.CodingDelta && !seen[rec.Base] {
			seen[rec.Base] = true
			bases = append(bases, rec.Base)
		}
	}
	out := map[objects.Digest]bool{}
	for i := 0; i < len(bases); i += remote.MaxHasBlobs {
		part := bases[i:min(i+remote.MaxHasBlobs, len(bases))]
		has, err := r.HasBlobs(ctx, part)
		if err != nil {
			return nil, err
		}
		for k, ok := range has {
			out[part[k]] = ok
		}
	}
	return out, nil
}

// sendCoded sends the blobs of j as st keeps them, each read with
// ReadStored (checked to decode to the blob first), raw where the remote
// cannot take the coding; blobs it refuses coded go again raw. It returns
// the bytes that crossed the network.
func sendCoded(ctx context.Context, st *store.Store, c remote.Coder, accept []string, r remote.Remote, rd *store.BlobReader, j job, recs map[objects.Digest]store.BlobRecord, bases map[objects.Digest]bool) (int64, error) {
	blobs := make([]remote.CodedBlob, len(j.blobs))
	var wire int64
	var plain []int // the blobs sent raw
	for i, d := range j.blobs {
		rec := recs[d]
		blobs[i] = remote.CodedBlob{Digest: d, Size: rec.Size, Coding: remote.CodingRaw}
		if !rec.Coded() || !slices.Contains(accept, rec.Coding.String()) || rec.Coding == store.CodingDelta && !bases[rec.Base] {
			plain = append(plain, i)
			continue
		}
		data, err := rd.ReadStored(rec, nil)
		if err != nil {
			return 0, err
		}
		blobs[i].Coding, blobs[i].Base, blobs[i].Data = rec.Coding.String(), rec.Base, data
		wire += int64(len(data))
	}
	ds := make([]objects.Digest, len(plain))
	for k, i := range plain {
		ds[k] = j.blobs[i]
	}
	data, err := readBlobs(rd, ds, recs)
	if err != nil {
		return 0, err
	}
	for k, i := range plain {
		blobs[i].Data = data[k]
		wire += int64(len(data[k]))
	}
	raw, err := c.PutCoded(ctx, blobs)
	if err != nil || len(raw) == 0 {
		return wire, err
	}
	for _, d := range raw {
		if _, ok := recs[d]; !ok {
			return 0, errs.New(errs.IntegrityError, "push", "the remote asks for blob %s, which was not sent", d.Short())
		}
	}
	again, err := readBlobs(rd, raw, recs)
	if err != nil {
		return 0, err
	}
	put := make([]remote.Blob, len(raw))
	for k, d := range raw {
		put[k] = remote.Blob{Digest: d, Data: again[k]}
		wire += int64(len(again[k]))
	}
	return wire, r.PutBlobs(ctx, put)
}

// readBlobs reads the raw bytes of blobs ds, each checked against its
// digest: those kept raw together, a run of a pack at a time
// (store.BlobReader.ReadRaw), the coded ones decoded one by one.
func readBlobs(rd *store.BlobReader, ds []objects.Digest, recs map[objects.Digest]store.BlobRecord) ([][]byte, error) {
	out := make([][]byte, len(ds))
	var raw []store.BlobRecord
	var rawAt []int
	for i, d := range ds {
		rec := recs[d]
		if !rec.Coded() {
			raw, rawAt = append(raw, rec), append(rawAt, i)
			continue
		}
		data, err := rd.Read(rec, nil)
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	data, err := rd.ReadRaw(raw, true)
	if err != nil {
		return nil, err
	}
	for k, i := range rawAt {
		out[i] = data[k]
	}
	return out, nil
}

package pathremote

import (
	"bytes"
	"context"
	"io"
	"os"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/store"
)

var _ remote.Coder = (*Remote)(nil)

// Codings implements remote.Coder: the codings a store keeps blobs in.
func (r *Remote) Codings() []string { return StoreCodings() }

// StoreCodings lists the codings this build's store reads and writes.
func StoreCodings() []string {
	return []string{store.CodingGrouped.String(), store.CodingDelta.String()}
}

// GetCoded implements remote.Coder. Blobs are sent as stored, unchecked
// (a coded one's stored bytes, a raw one's bytes), as GET /v1/blobs/HEX
// sends them: the receiver decodes and hashes every one, and doing it here
// too would double a pull's work.
func (r *Remote) GetCoded(ctx context.Context, ds []objects.Digest, accept []string) ([]remote.CodedBlob, error) {
	out := make([]remote.CodedBlob, len(ds))
	err := r.read(ctx, ds, func(recs []store.BlobRecord) error {
		var total int64
		for _, rec := range recs {
			total += rec.Size
		}
		if err := remote.CheckBatch(len(ds), total); err != nil {
			return err
		}
		rd := r.st.NewBlobReader()
		defer rd.Close()
		// The raw blobs are read together, a run of a pack at a time.
		var raw []store.BlobRecord
		var rawAt []int
		for i, rec := range recs {
			if !rec.Coded() {
				raw, rawAt = append(raw, rec), append(rawAt, i)
			}
		}
		data, err := rd.ReadRaw(raw, false)
		if err != nil {
			return err
		}
		for k, i := range rawAt {
			out[i] = remote.CodedBlob{Digest: recs[i].Digest, Size: recs[i].Size, Coding: remote.CodingRaw, Data: data[k]}
		}
		for i, rec := range recs {
			if err := ctx.Err(); err != nil {
				return err
			}
			if !rec.Coded() {
				continue
			}
			b := remote.CodedBlob{Digest: rec.Digest, Size: rec.Size, Coding: remote.CodingRaw}
			if slices.Contains(accept, rec.Coding.String()) {
				b.Coding, b.Base = rec.Coding.String(), rec.Base
				b.Data, err = r.readStored(rd, rec)
			} else {
				b.Data, err = rd.Read(rec, nil)
			}
			if err != nil {
				return err
			}
			out[i] = b
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PutCoded implements remote.Coder: every blob is decoded and checked
// before any is written; the rest is PutBlobs's way (made durable, then
// recorded in one transaction).
func (r *Remote) PutCoded(ctx context.Context, blobs []remote.CodedBlob) ([]objects.Digest, error) {
	var total int64
	for _, b := range blobs {
		total += b.Size
	}
	if err := remote.CheckBatch(len(blobs), total); err != nil {
		return nil, err
	}
	// gc of this store waits while blobs are written and not yet recorded,
	// and keeps the delta bases the check reads.
	lock, err := r.st.Lock(store.LockShared, 0)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	var missing map[objects.Digest]bool
	if err := r.st.View(func(tx *bolt.Tx) error {
		missing = map[objects.Digest]bool{}
		for _, d := range store.MissingBlobs(tx, codedDigests(blobs)) {
			missing[d] = true
		}
		return nil
	}); err != nil {
		return nil, err
	}
	blobs = slices.DeleteFunc(slices.Clone(blobs), func(b remote.CodedBlob) bool { return !missing[b.Digest] })
	recs, raw, err := CheckCoded(r.st, blobs)
	if err != nil {
		return nil, err
	}
	var rawDigests []objects.Digest
	for _, i := range raw {
		rawDigests = append(rawDigests, blobs[i].Digest)
	}
	w := r.st.NewBlobWriter(nil)
	defer w.Abort()
	for i, rec := range recs {
		if rec.Digest.IsZero() {
			continue // left to be sent raw
		}
		if _, err := w.PutStored(rec, blobs[i].Data); err != nil {
			return nil, err
		}
	}
	written, err := w.Commit()
	if err != nil {
		return nil, err
	}
	return rawDigests, r.st.Update(func(tx *bolt.Tx) error {
		if missing := store.MissingBlobs(tx, baseDigests(recs)); len(missing) > 0 {
			// A base gc took between the check and now: never record a
			// delta without its base.
			return errs.New(errs.Conflict, "remote", "delta base %s left the store during the upload; send again", missing[0].Short())
		}
		return store.RecordBlobs(tx, written)
	})
}

func codedDigests(blobs []remote.CodedBlob) []objects.Digest {
	out := make([]objects.Digest, len(blobs))
	for i, b := range blobs {
		out[i] = b.Digest
	}
	return out
}

func baseDigests(recs []store.BlobRecord) []objects.Digest {
	var out []objects.Digest
	for _, r := range recs {
		if r.Coding == store.CodingDelta {
			out = append(out, r.Base)
		}
	}
	return out
}

// CheckCoded turns blobs as another store keeps them into records of st,
// ready for BlobWriter.PutStored: each decoded and checked against its raw
// digest and size (a delta against its base as st keeps it). A mismatch is
// an integrity_error. A delta whose base st lacks, or keeps as a delta
// itself, cannot be taken coded: its index is in raw, its record zero. The
// caller holds st's shared lock, so that no base leaves meanwhile.
func CheckCoded(st *store.Store, blobs []remote.CodedBlob) (recs []store.BlobRecord, raw []int, err error) {
	bases := map[objects.Digest]store.BlobRecord{}
	err = st.View(func(tx *bolt.Tx) error {
		for _, b := range blobs {
			if b.Coding != remote.CodingDelta {
				continue
			}
			rec, ok, err := store.Blob(tx, b.Base)
			if err != nil {
				return err
			}
			if ok && rec.Coding != store.CodingDelta {
				bases[b.Base] = rec
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if err := verifyRaw(blobs); err != nil {
		return nil, nil, err
	}
	rd := st.NewBlobReader()
	defer rd.Close()
	recs = make([]store.BlobRecord, len(blobs))
	for i, b := range blobs {
		coding, ok := store.ParseCoding(b.Coding)
		if !ok {
			return nil, nil, errs.New(errs.UnsupportedVersion, "remote", "blob %s is coded %q, which this build does not know", b.Digest.Short(), b.Coding)
		}
		rec := store.BlobRecord{Digest: b.Digest, Size: b.Size, Coding: coding}
		if coding == store.CodingDelta {
			base, ok := bases[b.Base]
			if !ok {
				raw = append(raw, i)
				continue
			}
			rec.Base, rec.BaseRec = b.Base, &base
		}
		if rec.Coded() {
			if err := rd.CheckStored(rec, b.Data); err != nil {
				return nil, nil, err
			}
		}
		recs[i] = rec
	}
	return recs, raw, nil
}

// verifyRaw checks the blobs sent raw against their sizes and digests,
// eight small ones at a time (objects.FirstMismatch): a pull of a model of
// 100,000 small tensors checks 100,000 of them.
func verifyRaw(blobs []remote.CodedBlob) error {
	var datas [][]byte
	var want []objects.Digest
	for _, b := range blobs {
		if b.Coding != remote.CodingRaw {
			continue
		}
		if int64(len(b.Data)) != b.Size {
			return errs.New(errs.IntegrityError, "remote", "blob %s: %d bytes, %d expected", b.Digest.Short(), len(b.Data), b.Size)
		}
		datas, want = append(datas, b.Data), append(want, b.Digest)
	}
	if i, got := objects.FirstMismatch(datas, want); i >= 0 {
		return errs.New(errs.IntegrityError, "remote", "blob %s: content hashes to %s", want[i].Short(), got.Short())
	}
	return nil
}

// OpenCoded implements httpremote.CodedOpener: a raw blob's file as
// OpenBlob opens it (serve sends it with sendfile), a coded one's stored
// bytes when the client takes its coding, else its decoded bytes.
func (r *Remote) OpenCoded(ctx context.Context, d objects.Digest, accept []string) (io.ReadSeekCloser, remote.CodedBlob, error) {
	meta := remote.CodedBlob{Digest: d, Coding: remote.CodingRaw}
	var f io.ReadSeekCloser
	err := r.read(ctx, []objects.Digest{d}, func(recs []store.BlobRecord) error {
		rec := recs[0]
		meta.Size = rec.Size
		if !rec.Coded() || !slices.Contains(accept, rec.Coding.String()) {
			var err error
			f, err = r.openDecoded(rec)
			return err
		}
		rd := r.st.NewBlobReader()
		defer rd.Close()
		data, err := r.readStored(rd, rec)
		if err == nil {
			meta.Coding, meta.Base = rec.Coding.String(), rec.Base
			f = nopCloser{bytes.NewReader(data)}
		}
		return err
	})
	return f, meta, err
}

// readStored reads a coded blob's stored bytes from its pack, unchecked
// (see GetCoded); a pack file gone or cut short is an integrity_error (the
// lookup is then done again: see read). A coded blob outside a pack, which
// stores do not write, is read with ReadStored.
func (r *Remote) readStored(rd *store.BlobReader, rec store.BlobRecord) ([]byte, error) {
	if rec.Encoding != store.EncodingPacked {
		return rd.ReadStored(rec, nil)
	}
	f, err := os.Open(r.st.PackPath(rec.Pack))
	if err != nil {
		return nil, errs.Wrap(errs.IntegrityError, "remote", err, "blob %s: its pack is unreadable", rec.Digest.Short())
	}
	defer f.Close()
	b := make([]byte, rec.StoredSize())
	if _, err := f.ReadAt(b, rec.Offset); err != nil {
		return nil, errs.Wrap(errs.IntegrityError, "remote", err, "blob %s: its pack is cut short", rec.Digest.Short())
	}
	return b, nil
}

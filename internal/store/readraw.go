package store

import (
	"cmp"
	"errors"
	"os"
	"slices"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// ReadRaw reads the raw (not coded) blobs recs into one new buffer and
// returns each one's bytes: out[i] is recs[i]'s. Packed blobs that lie end
// to end in their pack, in whatever order recs gives them, are read with
// one read: a pull of a model of 100,000 small tensors read (and opened)
// its packs once per blob, 1.3 of its 2.3 s of CPU. With verify, each blob
// is checked against its digest, the small ones eight at a time
// (objects.FirstMismatch). Errors are Read's: a missing or short file is an
// integrity_error, and so is a coded record (read those with Read).
//
// The caller bounds recs (a remote's batch: remote.CheckBatch): the buffer
// holds all of them.
func (r *BlobReader) ReadRaw(recs []BlobRecord, verify bool) ([][]byte, error) {
	return r.ReadRawInto(recs, nil, verify)
}

// ReadRawInto is ReadRaw into buf when it is large enough: a reader that
// reads batch after batch reuses one buffer, not a new one each.
func (r *BlobReader) ReadRawInto(recs []BlobRecord, buf []byte, verify bool) ([][]byte, error) {
	var total int64
	for _, rec := range recs {
		if rec.Coded() {
			return nil, errs.New(errs.IntegrityError, "store", "blob %s is coded %s: ReadRaw reads raw blobs only", rec.Digest.Short(), rec.Coding)
		}
		total += rec.Size
	}
	// The buffer is laid out in pack and offset order, so that a run of a
	// pack lands in one piece of it.
	order := make([]int, len(recs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		x, y := &recs[a], &recs[b] // not copies: a record is 136 bytes
		if c := cmp.Compare(x.Encoding, y.Encoding); c != 0 {
			return c
		}
		if c := slices.Compare(x.Pack[:], y.Pack[:]); c != 0 {
			return c
		}
		return cmp.Compare(x.Offset, y.Offset)
	})
	if int64(cap(buf)) < total {
		buf = make([]byte, total)
	}
	buf = buf[:total]
	out := make([][]byte, len(recs))
	pos := make([]int64, len(order)) // where order[k]'s bytes start in buf
	var at int64
	for k, i := range order {
		out[i], pos[k] = buf[at:at+recs[i].Size:at+recs[i].Size], at
		at += recs[i].Size
	}
	for k := 0; k < len(order); {
		first := recs[order[k]]
		if first.Encoding != EncodingPacked {
			if _, err := r.readStored(first, out[order[k]], false); err != nil {
				return nil, err
			}
			k++
			continue
		}
		// The run: the blobs that follow first end to end in its pack.
		end, n := first.Offset+first.Size, 1
		for k+n < len(order) {
			next := recs[order[k+n]]
			if next.Encoding != EncodingPacked || next.Pack != first.Pack || next.Offset != end {
				break
			}
			end += next.Size
			n++
		}
		if err := r.readPackRun(first, buf[pos[k]:pos[k]+end-first.Offset]); err != nil {
			return nil, err
		}
		k += n
	}
	if verify {
		want := make([]objects.Digest, len(recs))
		for i, rec := range recs {
			want[i] = rec.Digest
		}
		if i, got := objects.FirstMismatch(out, want); i >= 0 {
			return nil, errs.New(errs.IntegrityError, "store", "blob %s: content hashes to %s", recs[i].Digest.Short(), got.Short())
		}
	}
	return out, nil
}

// readPackRun fills run from first's pack at first's offset: first's
// bytes and those of the blobs after it in the pack.
func (r *BlobReader) readPackRun(first BlobRecord, run []byte) error {
	f, err := r.pack(first.Pack)
	if err == nil {
		_, err = f.ReadAt(run, first.Offset)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrNotExist):
		return errs.New(errs.IntegrityError, "store", "blob %s is missing from the store (run `mstore fsck`)", first.Digest.Short())
	}
	return errs.Wrap(errs.IntegrityError, "store", err, "blob %s: unreadable", first.Digest.Short())
}

package pathremote

import (
	"bytes"
	"context"
	"errors"
	"io"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/store"
)

// FailAfterLookup is the failpoint between reading blobs' index records and
// reading their files: where a gc or repack that moves them meanwhile
// used to fail the read.
const FailAfterLookup = "remote-after-lookup"

// read runs fn over the index records of ds. Reads take no store lock, so
// that a long-running serve never holds gc off; a gc or repack that moves
// or removes a blob between the lookup and the read (a pack rewritten, a
// loose file replaced by its coded copy) makes fn fail with an
// integrity_error. Then the lookup is done again under the store's shared
// lock, which gc and repack need exclusive to delete a file, so the second
// read sees where the blob is now (or that it is gone: not_found). One
// still unreadable then is damaged, and its error stands.
func (r *Remote) read(ctx context.Context, ds []objects.Digest, fn func([]store.BlobRecord) error) error {
	recs, err := r.records(ds)
	if err != nil {
		return err
	}
	store.Failpoint(FailAfterLookup)
	err = fn(recs)
	if errs.ClassOf(err) != errs.IntegrityError || ctx.Err() != nil {
		return err
	}
	lock, lerr := r.st.Lock(store.LockShared, 0)
	if lerr != nil {
		return errors.Join(err, lerr)
	}
	defer lock.Unlock()
	if recs, err = r.records(ds); err != nil {
		return err
	}
	return fn(recs)
}

// GetBlob implements remote.Remote. The store's reader checks the bytes'
// digest, so a blob damaged on disk here is an integrity_error.
func (r *Remote) GetBlob(ctx context.Context, d objects.Digest, off, n int64) ([]byte, error) {
	var data []byte
	err := r.read(ctx, []objects.Digest{d}, func(recs []store.BlobRecord) error {
		rd := r.st.NewBlobReader()
		defer rd.Close()
		var err error
		data, err = rd.Read(recs[0], nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	return remote.Range(data, d, off, n)
}

// OpenBlob opens blob d as stored, unverified, with its size: serve hands
// it to the client, which checks it (see httpremote.BlobOpener). Once open,
// the file stays readable whatever gc does to its name.
func (r *Remote) OpenBlob(ctx context.Context, d objects.Digest) (io.ReadSeekCloser, error) {
	var f io.ReadSeekCloser
	err := r.read(ctx, []objects.Digest{d}, func(recs []store.BlobRecord) error {
		var err error
		f, err = r.openDecoded(recs[0])
		return err
	})
	return f, err
}

// openDecoded opens a raw blob's file, or a coded blob decoded (and
// verified on the way, like any other read): its stored bytes are not the
// blob's.
func (r *Remote) openDecoded(rec store.BlobRecord) (io.ReadSeekCloser, error) {
	if !rec.Coded() {
		return r.st.OpenBlob(rec)
	}
	rd := r.st.NewBlobReader()
	defer rd.Close()
	data, err := rd.Read(rec, nil)
	if err != nil {
		return nil, err
	}
	return nopCloser{bytes.NewReader(data)}, nil
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// GetBlobs implements remote.Remote: GetCoded with no coding accepted
// (raw blobs unhashed; the receiver hashes them).
func (r *Remote) GetBlobs(ctx context.Context, ds []objects.Digest) ([][]byte, error) {
	blobs, err := r.GetCoded(ctx, ds, nil)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(blobs))
	for i, b := range blobs {
		out[i] = b.Data
	}
	return out, nil
}

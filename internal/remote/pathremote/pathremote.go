package pathremote

import (
	"context"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/store"
)

// Remote is a store directory used as a remote.
type Remote struct {
	st *store.Store
}

var _ remote.Remote = (*Remote)(nil)

// Open opens the store at dir; with create, a missing one is created (a
// push to a new path makes the store, as the first add does).
func Open(dir string, create bool) (*Remote, error) {
	st, err := store.Open(dir, create, store.Options{})
	if err != nil {
		return nil, err
	}
	return &Remote{st: st}, nil
}

// New uses an open store as a remote (serve does).
func New(st *store.Store) *Remote { return &Remote{st: st} }

func (r *Remote) where() string { return r.st.Dir() }

// HasBlobs implements remote.Remote.
func (r *Remote) HasBlobs(ctx context.Context, ds []objects.Digest) ([]bool, error) {
	if len(ds) > remote.MaxHasBlobs {
		return nil, errs.New(errs.SizeLimitExceeded, "remote", "asked about %d blobs at once (at most %d)", len(ds), remote.MaxHasBlobs)
	}
	out := make([]bool, len(ds))
	err := r.st.View(func(tx *bolt.Tx) error {
		missing := map[objects.Digest]bool{}
		for _, d := range store.MissingBlobs(tx, ds) {
			missing[d] = true
		}
		for i, d := range ds {
			out[i] = !missing[d]
		}
		return nil
	})
	return out, err
}

// records reads the index records of ds; one not recorded is not_found.
// They are looked up in key order, with one cursor (store.RecordsInOrder);
// only when that fails is each looked up in turn, to name the blob that is
// not recorded.
func (r *Remote) records(ds []objects.Digest) ([]store.BlobRecord, error) {
	var out []store.BlobRecord
	err := r.st.View(func(tx *bolt.Tx) error {
		var err error
		if out, err = store.RecordsInOrder(tx, ds); err == nil {
			return nil
		}
		out = make([]store.BlobRecord, len(ds))
		for i, d := range ds {
			rec, ok, err := store.Blob(tx, d)
			if err != nil {
				return err
			}
			if !ok {
				return remote.NoBlob(r.where(), d)
			}
			out[i] = rec
		}
		return nil
	})
	return out, err
}

// PutBlobs implements remote.Remote: every blob is verified before any is
// written; those the store has are skipped; the rest are made durable and
// then recorded in one transaction.
func (r *Remote) PutBlobs(ctx context.Context, blobs []remote.Blob) error {
	if err := remote.VerifyBlobs(blobs); err != nil {
		return err
	}
	var missing map[objects.Digest]bool
	err := r.st.View(func(tx *bolt.Tx) error {
		ds := make([]objects.Digest, len(blobs))
		for i, b := range blobs {
			ds[i] = b.Digest
		}
		missing = map[objects.Digest]bool{}
		for _, d := range store.MissingBlobs(tx, ds) {
			missing[d] = true
		}
		return nil
	})
	if err != nil || len(missing) == 0 {
		return err
	}
	// gc of this store waits while blobs are written and not yet recorded.
	lock, err := r.st.Lock(store.LockShared, 0)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	w := r.st.NewBlobWriter(nil)
	defer w.Abort()
	for _, b := range blobs {
		if missing[b.Digest] {
			if _, err := w.Put(b.Digest, b.Data); err != nil {
				return err
			}
		}
	}
	recs, err := w.Commit()
	if err != nil {
		return err
	}
	return r.st.Update(func(tx *bolt.Tx) error { return store.RecordBlobs(tx, recs) })
}

// GetManifest implements remote.Remote.
func (r *Remote) GetManifest(ctx context.Context, d objects.Digest) ([]byte, error) {
	var b []byte
	err := r.st.View(func(tx *bolt.Tx) (err error) {
		b, err = r.st.ManifestBytes(tx, d)
		return err
	})
	if err == nil && b == nil {
		err = remote.NoManifest(r.where(), d)
	}
	return b, err
}

// PutManifest implements remote.Remote.
func (r *Remote) PutManifest(ctx context.Context, d objects.Digest, encoded []byte) (created bool, err error) {
	m, err := remote.CheckManifest(d, encoded)
	if err != nil {
		return false, err
	}
	// gc of this store waits while the manifest's blob copy is unrecorded.
	lock, err := r.st.Lock(store.LockShared, 0)
	if err != nil {
		return false, err
	}
	defer lock.Unlock()
	if err := r.st.View(func(tx *bolt.Tx) error {
		if missing := store.MissingBlobs(tx, m.Blobs()); len(missing) > 0 {
			return &remote.MissingBlobsError{Manifest: d, Missing: missing}
		}
		return nil
	}); err != nil {
		return false, err // refused before anything is written
	}
	copyRecs, err := r.st.WriteManifestBlob(d, encoded)
	if err != nil {
		return false, err
	}
	err = r.st.Update(func(tx *bolt.Tx) error {
		if missing := store.MissingBlobs(tx, m.Blobs()); len(missing) > 0 {
			return &remote.MissingBlobsError{Manifest: d, Missing: missing}
		}
		if err := store.RecordBlobs(tx, copyRecs); err != nil {
			return err
		}
		created = !(store.ManifestIndex{Tx: tx}).HasManifest(d)
		return store.PutManifest(tx, d, encoded)
	})
	return created && err == nil, err
}

// Ref implements remote.Remote.
func (r *Remote) Ref(ctx context.Context, name string) (remote.RefInfo, error) {
	info := remote.RefInfo{Name: name}
	err := r.st.View(func(tx *bolt.Tx) error {
		hist, err := refs.History(tx, name)
		if errs.ClassOf(err) == errs.NotFound {
			return remote.NoRef(r.where(), name)
		}
		if err != nil {
			return err
		}
		for _, e := range hist {
			info.History = append(info.History, e.Digest)
		}
		info.Current = info.History[0]
		return nil
	})
	return info, err
}

// Tag implements remote.Remote.
func (r *Remote) Tag(ctx context.Context, name, tag string) (objects.Digest, error) {
	var d objects.Digest
	err := r.st.View(func(tx *bolt.Tx) error {
		var err error
		d, err = refs.Resolve(tx, refs.Spec{Kind: refs.KindTag, Name: name, Tag: tag}, store.ManifestIndex{Tx: tx})
		if errs.ClassOf(err) == errs.NotFound {
			return remote.NoTag(r.where(), name, tag)
		}
		return err
	})
	return d, err
}

// MoveRef implements remote.Remote: the comparison and the move are one
// index transaction.
func (r *Remote) MoveRef(ctx context.Context, name string, from, to objects.Digest, message string) error {
	return r.st.Update(func(tx *bolt.Tx) error {
		if !(store.ManifestIndex{Tx: tx}).HasManifest(to) {
			return remote.NoManifest(r.where(), to)
		}
		cur, err := refs.Current(tx, name)
		if err != nil && errs.ClassOf(err) != errs.NotFound {
			return err
		}
		if cur != from {
			return remote.RefMoved(r.where(), name, from, cur)
		}
		if cur == to {
			return nil
		}
		_, err = refs.Move(tx, name, to, message, time.Now().UTC())
		return err
	})
}

// CreateTag implements remote.Remote.
func (r *Remote) CreateTag(ctx context.Context, name, tag string, d objects.Digest) (bool, error) {
	var created bool
	err := r.st.Update(func(tx *bolt.Tx) error {
		if !(store.ManifestIndex{Tx: tx}).HasManifest(d) {
			return remote.NoManifest(r.where(), d)
		}
		var err error
		created, err = refs.Tag(tx, name, tag, d)
		return err
	})
	return created, err
}

// Close implements remote.Remote.
func (r *Remote) Close() error { return nil }

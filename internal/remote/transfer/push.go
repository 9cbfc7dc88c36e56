package transfer

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sync/errgroup"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/progress"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/store"
)

// PushOptions say what to push.
type PushOptions struct {
	// Version is NAME (the ref moves on the remote) or NAME:TAG (the tag
	// is created there).
	Version string
	// Jobs bounds the requests in flight; zero means DefaultJobs.
	Jobs int
	// RemoteName names the remote in messages.
	RemoteName string
	// Progress, if not nil, is told the bytes to send and those sent.
	Progress progress.Reporter
}

// Push sends a local version to r: the blobs r lacks (r verifies each),
// then the manifest, then the ref move as a compare-and-swap against the
// value read before anything was sent, or the tag's creation.
func Push(ctx context.Context, st *store.Store, r remote.Remote, o PushOptions) (*Result, error) {
	start := time.Now()
	spec, err := refs.ParseSpec(o.Version)
	if err != nil {
		return nil, err
	}
	if spec.Kind != refs.KindRef && spec.Kind != refs.KindTag {
		return nil, errs.New(errs.SchemaError, "push", "%q: push takes NAME or NAME:TAG", o.Version)
	}
	d, err := names.Resolve(st, o.Version)
	if err != nil {
		return nil, err
	}
	v, lock, err := st.ReadVersion(d, true) // held shared: gc waits until the blobs are read
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	m, encoded, recs := v.Manifest, v.Encoded, v.Records
	res := &Result{Name: spec.Name, Tag: spec.Tag, Digest: d, Remote: o.RemoteName}
	var from objects.Digest
	if spec.Kind == refs.KindRef {
		info, err := r.Ref(ctx, spec.Name)
		if err != nil && errs.ClassOf(err) != errs.NotFound {
			return nil, err
		}
		from = info.Current
		if err := checkFastForward(st, spec.Name, from, o.RemoteName); err != nil {
			return nil, err
		}
	}
	if spec.Kind == refs.KindTag {
		// Refuse before sending anything (CreateTag checks again at the end).
		old, err := r.Tag(ctx, spec.Name, spec.Tag)
		if err != nil && errs.ClassOf(err) != errs.NotFound {
			return nil, err
		}
		if err == nil && old != d {
			return nil, errs.New(errs.Conflict, "push", "tag %s on %s already names %s, not %s; tags never move (choose another tag)", o.Version, o.RemoteName, old.Short(), d.Short())
		}
	}
	if pl, ok := r.(remote.PushLocker); ok {
		release, err := pl.LockPush(ctx)
		if err != nil {
			return nil, err
		}
		defer release() // after the ref or tag has moved
	}
	need := m.Blobs()
	var missing []objects.Digest
	for i := 0; i < len(need); i += remote.MaxHasBlobs {
		part := need[i:min(i+remote.MaxHasBlobs, len(need))]
		has, err := r.HasBlobs(ctx, part)
		if err != nil {
			return nil, err
		}
		if len(has) != len(part) {
			return nil, fmt.Errorf("push: the remote answered %d of %d blob questions", len(has), len(part))
		}
		for j, ok := range has {
			if !ok {
				missing = append(missing, part[j])
			}
		}
	}
	res.BlobsPresent = len(need) - len(missing)
	missing = inManifestOrder(m, missing)
	store.Failpoint(store.FailPushBlobsChecked)
	sizes := make(map[objects.Digest]int64, len(recs))
	for dg, rec := range recs {
		sizes[dg] = rec.Size
	}
	jobs := o.Jobs
	if jobs <= 0 {
		jobs = DefaultJobs
	}
	if o.Progress != nil {
		var total int64
		for _, d := range missing {
			total += sizes[d]
		}
		o.Progress.Start(total)
		defer o.Progress.Finish()
	}
	up := uploader{st: st, r: r, recs: recs, bar: o.Progress}
	if up.coder, up.accept = coderOf(r); up.coder != nil {
		if up.bases, err = remoteBases(ctx, r, missing, recs); err != nil {
			return nil, err
		}
	}
	err = up.run(ctx, planJobs(missing, sizes), jobs)
	res.BlobsMoved, res.BytesMoved, res.WireBytes = int(up.moved.Load()), up.bytes.Load(), up.wire.Load()
	if err != nil {
		return nil, err
	}
	created, err := r.PutManifest(ctx, d, encoded)
	if err != nil {
		return nil, err
	}
	store.Failpoint(store.FailPushManifestPut)
	// The manifest counts as one blob (a store keeps it as one too).
	if created {
		res.BlobsMoved++
		res.BytesMoved += int64(len(encoded))
		res.WireBytes += int64(len(encoded))
	} else {
		res.BlobsPresent++
	}
	switch spec.Kind {
	case refs.KindRef:
		if from != d {
			if err := r.MoveRef(ctx, spec.Name, from, d, "push "+o.Version); err != nil {
				return nil, err
			}
			res.RefMoved = true
		}
	case refs.KindTag:
		if res.TagCreated, err = r.CreateTag(ctx, spec.Name, spec.Tag, d); err != nil {
			return nil, err
		}
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// uploader sends blobs of st to r, reading (and so verifying) each.
type uploader struct {
	st     *store.Store
	r      remote.Remote
	recs   map[objects.Digest]store.BlobRecord
	bar    progress.Reporter
	coder  remote.Coder // with accept and bases: blobs move coded
	accept []string
	bases  map[objects.Digest]bool

	moved, bytes, wire atomic.Int64
}

// run sends the blobs of jobs, n requests at once.
func (u *uploader) run(ctx context.Context, jobs []job, n int) error {
	rd := u.st.NewBlobReader()
	defer rd.Close()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(n)
	for _, j := range jobs {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := u.send(gctx, rd, j); err != nil {
				return err
			}
			u.moved.Add(int64(len(j.blobs)))
			u.bytes.Add(j.bytes)
			if u.bar != nil {
				u.bar.Add(j.bytes)
			}
			store.Failpoint(store.FailPushBlobsSent)
			return nil
		})
	}
	return g.Wait()
}

func (u *uploader) send(ctx context.Context, rd *store.BlobReader, j job) error {
	if u.coder != nil {
		k, err := sendCoded(ctx, u.st, u.coder, u.accept, u.r, rd, j, u.recs, u.bases)
		u.wire.Add(k)
		return err
	}
	data, err := readBlobs(rd, j.blobs, u.recs)
	if err != nil {
		return err
	}
	blobs := make([]remote.Blob, len(j.blobs))
	for i, d := range j.blobs {
		blobs[i] = remote.Blob{Digest: d, Data: data[i]}
		u.wire.Add(int64(len(data[i])))
	}
	return u.r.PutBlobs(ctx, blobs)
}

// checkFastForward refuses to push over a remote ref whose version is not
// in the local ref's history: that push would hide a version somebody else
// pushed, which this store has never seen.
func checkFastForward(st *store.Store, name string, remoteAt objects.Digest, where string) error {
	if remoteAt.IsZero() {
		return nil
	}
	return st.View(func(tx *bolt.Tx) error {
		hist, err := refs.History(tx, name)
		if err != nil {
			return err
		}
		for _, e := range hist {
			if e.Digest == remoteAt {
				return nil
			}
		}
		return errs.New(errs.Conflict, "push", "%q on %s is at %s, which is not in the local history of %q; pull it first (`mstore pull %s %s`), then move %q and push again", name, where, remoteAt.Short(), name, where, name, name)
	})
}

package transfer

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sync/errgroup"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/progress"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/store"
)

// DefaultJobs is how many requests a transfer has in flight.
const DefaultJobs = 8

// DefaultCheckpointBytes is how many fetched bytes a pull makes durable and
// records at a time.
const DefaultCheckpointBytes = 256 << 20

// PullOptions say what to pull.
type PullOptions struct {
	// Version is NAME, NAME:TAG or NAME@DIGEST on the remote.
	Version string
	// As is the local name to record it under; empty means NAME.
	As string
	// Jobs bounds the requests in flight; zero means DefaultJobs.
	Jobs int
	// CheckpointBytes: see DefaultCheckpointBytes; zero means that.
	CheckpointBytes int64
	// RemoteName names the remote in the history entry.
	RemoteName string
	// Message is the history entry; empty means "pull REMOTE VERSION".
	Message string
	// Progress, if not nil, is told the bytes to fetch and those fetched.
	Progress progress.Reporter
}

// Result is what a pull or push did.
type Result struct {
	Name         string         `json:"name"`
	Tag          string         `json:"tag,omitempty"`
	Digest       objects.Digest `json:"digest"`
	Remote       string         `json:"remote"`
	BlobsMoved   int            `json:"blobs_moved"`
	BytesMoved   int64          `json:"bytes_moved"`
	BlobsPresent int            `json:"blobs_present"`
	// WireBytes is the blob bytes that crossed the network: less than
	// BytesMoved when blobs moved coded (remote.Coder).
	WireBytes int64 `json:"wire_bytes"`
	// RefMoved says whether the ref moved (locally for a pull, on the
	// remote for a push); TagCreated whether the tag is new.
	RefMoved   bool    `json:"ref_moved"`
	TagCreated bool    `json:"tag_created"`
	Seconds    float64 `json:"seconds"`
}

// resolveRemote finds the digest a version name means on the remote. A
// pinned digest must be in NAME's history there.
func resolveRemote(ctx context.Context, r remote.Remote, spec refs.Spec) (objects.Digest, error) {
	switch spec.Kind {
	case refs.KindRef:
		info, err := r.Ref(ctx, spec.Name)
		return info.Current, err
	case refs.KindTag:
		return r.Tag(ctx, spec.Name, spec.Tag)
	case refs.KindPinned:
		info, err := r.Ref(ctx, spec.Name)
		if err != nil {
			return objects.Digest{}, err
		}
		var found []objects.Digest
		seen := map[objects.Digest]bool{}
		for _, d := range info.History {
			if !seen[d] && len(spec.Digest) <= 64 && d.String()[:len(spec.Digest)] == spec.Digest {
				found = append(found, d)
			}
			seen[d] = true
		}
		switch len(found) {
		case 0:
			return objects.Digest{}, errs.New(errs.NotFound, "pull", "%s is not in the history of %q on the remote: a pinned pull takes only a version that ref has named", spec.Digest, spec.Name)
		case 1:
			return found[0], nil
		}
		return objects.Digest{}, errs.New(errs.NotFound, "pull", "%s matches %d versions in the history of %q; give more digits", spec.Digest, len(found), spec.Name)
	}
	return objects.Digest{}, errs.New(errs.SchemaError, "pull", "%q: pull takes NAME, NAME:TAG or NAME@DIGEST", spec.String())
}

// Pull fetches a version from r into st: the manifest, then the blobs st
// lacks (each verified before it is written), then, in one transaction,
// the manifest, the ref move and the tag.
func Pull(ctx context.Context, st *store.Store, r remote.Remote, o PullOptions) (*Result, error) {
	start := time.Now()
	spec, err := refs.ParseSpec(o.Version)
	if err != nil {
		return nil, err
	}
	if spec.Kind == refs.KindDigest || spec.Kind == refs.KindBack {
		return nil, errs.New(errs.SchemaError, "pull", "%q: pull takes NAME, NAME:TAG or NAME@DIGEST", o.Version)
	}
	name := spec.Name
	if o.As != "" {
		if name, err = refs.ParseName(o.As); err != nil {
			return nil, err
		}
	}
	d, err := resolveRemote(ctx, r, spec)
	if err != nil {
		return nil, err
	}
	encoded, err := r.GetManifest(ctx, d)
	if err != nil {
		return nil, err
	}
	m, err := remote.CheckManifest(d, encoded)
	if err != nil {
		return nil, errs.Wrap(errs.ClassOf(err), "pull", err, "the remote's manifest %s", d.Short())
	}
	res := &Result{Name: name, Tag: spec.Tag, Digest: d, Remote: o.RemoteName}
	if err := checkLocalTag(st, name, spec.Tag, d); err != nil {
		return nil, err
	}
	// As for add: gc waits while a pull holds the store's lock (shared),
	// so it never deletes what this pull found, wrote or recorded.
	lock, err := st.Lock(store.LockShared, 0)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	need := m.Blobs()
	var missing []objects.Digest
	if err := st.View(func(tx *bolt.Tx) error {
		missing = store.MissingBlobs(tx, need)
		return nil
	}); err != nil {
		return nil, err
	}
	res.BlobsPresent = len(need) - len(missing)
	missing = inManifestOrder(m, missing)
	sizes := remote.BlobSizes(m)
	m = nil // need and sizes are what the rest takes of it: a large manifest is not kept decoded
	jobs := o.Jobs
	if jobs <= 0 {
		jobs = DefaultJobs
	}
	limit := o.CheckpointBytes
	if limit <= 0 {
		limit = DefaultCheckpointBytes
	}
	var last []store.BlobRecord
	all := rounds(planJobs(missing, sizes), limit)
	if o.Progress != nil {
		var total int64
		for _, d := range missing {
			total += sizes[d]
		}
		o.Progress.Start(total)
		defer o.Progress.Finish()
	}
	for i, round := range all {
		recs, wire, err := fetchRound(ctx, st, r, round, sizes, jobs, true, o.Progress)
		if err != nil {
			return nil, err
		}
		res.WireBytes += wire
		for _, rec := range recs {
			res.BlobsMoved++
			res.BytesMoved += rec.Size
		}
		if i == len(all)-1 {
			last = recs // recorded with the version
			break
		}
		if err := st.RecordInBatches(recs); err != nil {
			return nil, err
		}
		store.Failpoint(store.FailPullBlobsRecorded)
	}
	// The manifest is a blob too (the copy `fsck --rebuild-index` reads):
	// it crossed the network with the version, so it counts as moved.
	copyRecs, err := st.WriteManifestBlob(d, encoded)
	if err != nil {
		return nil, err
	}
	for _, rec := range copyRecs {
		res.BlobsMoved++
		res.BytesMoved += rec.Size
		res.WireBytes += rec.Size
	}
	if len(copyRecs) == 0 {
		res.BlobsPresent++
	}
	last = append(last, copyRecs...)
	// The blobs of a large last round are recorded in bounded batches
	// before the version's transaction (RecordAhead), as add's are.
	if last, err = st.RecordAhead(last, store.FailPullBlobsRecorded); err != nil {
		return nil, err
	}
	msg := o.Message
	if msg == "" {
		msg = fmt.Sprintf("pull %s %s", o.RemoteName, o.Version)
	}
	res.RefMoved, res.TagCreated, err = commitPulled(st, d, encoded, need, last, name, spec.Tag, msg)
	if err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// checkLocalTag refuses, before anything moves, a local tag that names
// another version (the commit checks again, in its transaction).
func checkLocalTag(st *store.Store, name, tag string, d objects.Digest) error {
	if tag == "" {
		return nil
	}
	return st.View(func(tx *bolt.Tx) error {
		cur, err := refs.Resolve(tx, refs.Spec{Kind: refs.KindTag, Name: name, Tag: tag}, store.ManifestIndex{Tx: tx})
		if errs.ClassOf(err) == errs.NotFound {
			return nil
		}
		if err != nil {
			return err
		}
		if cur != d {
			return errs.New(errs.Conflict, "pull", "local tag %s:%s names %s, the remote's names %s; tags never move (pull with --as OTHERNAME)", name, tag, cur.Short(), d.Short())
		}
		return nil
	})
}

// fetchRound fetches the blobs of jobs, several requests at once, checks
// each against its digest and size, and makes them durable in st. It
// returns their records, not yet in the index, and the bytes that crossed
// the network. With coded, blobs move as the remote keeps them where both
// ends know the coding.
func fetchRound(ctx context.Context, st *store.Store, r remote.Remote, jobs []job, sizes map[objects.Digest]int64, n int, coded bool, bar progress.Reporter) ([]store.BlobRecord, int64, error) {
	w := st.NewBlobWriter(nil)
	defer w.Abort()
	w.WriteUncached() // not read back soon; their buffers carry the next blobs
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(n)
	var failed atomic.Bool
	var wire atomic.Int64
	var coder remote.Coder
	var accept []string
	if coded {
		coder, accept = coderOf(r)
	}
	for _, j := range jobs {
		if failed.Load() {
			break
		}
		g.Go(func() error {
			var data [][]byte
			var err error
			if coder != nil {
				var k int64
				if k, err = fetchCoded(gctx, st, coder, accept, r, j, sizes, w); err != nil {
					failed.Store(true)
					return err
				}
				wire.Add(k)
				if bar != nil {
					bar.Add(j.bytes)
				}
				return nil
			}
			if j.batch {
				data, err = r.GetBlobs(gctx, j.blobs)
			} else {
				var b []byte
				b, err = r.GetBlob(gctx, j.blobs[0], 0, -1)
				data = [][]byte{b}
			}
			if err == nil && len(data) != len(j.blobs) {
				err = errs.New(errs.IntegrityError, "pull", "the remote sent %d blobs for %d asked", len(data), len(j.blobs))
			}
			if err == nil {
				err = checkBlobs(j.blobs, sizes, data)
			}
			for i := 0; err == nil && i < len(j.blobs); i++ {
				wire.Add(int64(len(data[i])))
				_, err = w.Put(j.blobs[i], data[i])
			}
			if err != nil {
				failed.Store(true)
			} else if bar != nil {
				bar.Add(j.bytes)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	recs, err := w.Commit()
	return recs, wire.Load(), err
}

// checkBlobs is the check every fetched blob passes before it is written:
// data[i] is blob ds[i], of the size its manifest gives. The small ones
// are hashed eight at a time (objects.FirstMismatch).
func checkBlobs(ds []objects.Digest, sizes map[objects.Digest]int64, data [][]byte) error {
	for i, d := range ds {
		if int64(len(data[i])) != sizes[d] {
			return errs.New(errs.IntegrityError, "pull", "blob %s from the remote has %d bytes, its manifest says %d; nothing of this version was recorded", d.Short(), len(data[i]), sizes[d])
		}
	}
	if i, got := objects.FirstMismatch(data, ds); i >= 0 {
		return errs.New(errs.IntegrityError, "pull", "blob %s from the remote hashes to %s; nothing of this version was recorded", ds[i].Short(), got.Short())
	}
	return nil
}

// commitPulled records a pulled version in one transaction, last: the
// blobs of the final round, a check that every blob the version needs is
// recorded, the manifest, the ref move and the tag. It is the one place a
// pull writes a version (compare archiver.Add's commit).
func commitPulled(st *store.Store, d objects.Digest, encoded []byte, need []objects.Digest, written []store.BlobRecord, name, tag, message string) (moved, created bool, err error) {
	err = st.Update(func(tx *bolt.Tx) error {
		if err := store.RecordBlobs(tx, written); err != nil {
			return err
		}
		if err := store.RequireRecorded(tx, need); err != nil { // one cursor walk, as add's
			return errs.Wrap(errs.IntegrityError, "pull", err, "a blob this version needs left the store during the pull; pull again")
		}
		if err := store.PutManifest(tx, d, encoded); err != nil {
			return err
		}
		cur, err := refs.Current(tx, name)
		if err != nil && errs.ClassOf(err) != errs.NotFound {
			return err
		}
		if err != nil || cur != d {
			if _, err := refs.Move(tx, name, d, message, time.Now().UTC()); err != nil {
				return err
			}
			moved = true
		}
		if tag != "" {
			if created, err = refs.Tag(tx, name, tag, d); err != nil {
				return err
			}
		}
		return nil
	})
	return moved, created, err
}

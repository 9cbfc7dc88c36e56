package s3remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// GCObject is an object gc deletes or keeps.
type GCObject struct {
	Key      string    `json:"key"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

// GCPlan is what a gc of a bucket remote would delete: the manifests no
// ref history or tag names and the blobs no kept manifest needs, when
// older than the grace period. Younger ones are kept: they may belong to a
// push in flight (whose manifest is also a root while it is young).
type GCPlan struct {
	Refs          int        `json:"refs"`
	Tags          int        `json:"tags"`
	Manifests     int        `json:"manifests"`
	LiveBlobs     int        `json:"live_blobs"`
	Delete        []GCObject `json:"delete"`
	KeptYoung     []GCObject `json:"kept_young"`
	DeleteBytes   int64      `json:"delete_bytes"`
	Grace         string     `json:"grace"`
	graceDuration time.Duration
}

// GCResult is what ExecuteGC did.
type GCResult struct {
	Deleted       int      `json:"deleted"`
	FreedBytes    int64    `json:"freed_bytes"`
	Spared        int      `json:"spared"` // became live between plan and execution
	FailedDeletes []string `json:"failed_deletes,omitempty"`
}

func (r *Remote) list(ctx context.Context, sub string, fn func(minio.ObjectInfo) error) error {
	for o := range r.c.ListObjects(ctx, r.bucket, minio.ListObjectsOptions{Prefix: r.prefix + sub, Recursive: true}) {
		if o.Err != nil {
			return r.wrap(o.Err, "list "+sub+" of")
		}
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

type marked struct {
	refs, tags int
	manifests  map[objects.Digest]bool // kept
	blobs      map[objects.Digest]bool // live
	packs      map[string]bool         // pack HEX → holds a live blob
	all        []minio.ObjectInfo      // manifests/, blobs/ and packs/ objects
}

// mark finds what must stay. It fails rather than skip anything it cannot
// read: a skipped ref would let gc delete a live version.
func (r *Remote) mark(ctx context.Context, grace time.Duration, now time.Time) (*marked, error) {
	m := &marked{manifests: map[objects.Digest]bool{}, blobs: map[objects.Digest]bool{}, packs: map[string]bool{}}
	err := r.list(ctx, "refs/", func(o minio.ObjectInfo) error {
		b, _, err := r.get(ctx, o.Key, maxRefDoc, minio.GetObjectOptions{})
		if err != nil {
			return r.wrap(err, "read ref "+o.Key+" of")
		}
		var doc refObject
		if err := json.Unmarshal(b, &doc); err != nil || len(doc.History) == 0 {
			return errs.New(errs.IntegrityError, "s3", "ref object %s does not parse; gc deletes nothing", o.Key)
		}
		m.refs++
		for _, e := range doc.History {
			m.manifests[e.Digest] = true
		}
		return nil
	})
	if err == nil {
		err = r.list(ctx, "tags/", func(o minio.ObjectInfo) error {
			b, _, err := r.get(ctx, o.Key, 4096, minio.GetObjectOptions{})
			if err != nil {
				return r.wrap(err, "read tag "+o.Key+" of")
			}
			var doc tagObject
			if err := json.Unmarshal(b, &doc); err != nil || doc.Digest.IsZero() {
				return errs.New(errs.IntegrityError, "s3", "tag object %s does not parse; gc deletes nothing", o.Key)
			}
			m.tags++
			m.manifests[doc.Digest] = true
			return nil
		})
	}
	if err == nil {
		err = r.list(ctx, "manifests/", func(o minio.ObjectInfo) error {
			m.all = append(m.all, o)
			if d, err := objects.ParseDigest(strings.TrimPrefix(o.Key, r.prefix+"manifests/")); err == nil && now.Sub(o.LastModified) < grace {
				m.manifests[d] = true // a push in flight: its ref may come next
			}
			return nil
		})
	}
	if err == nil {
		err = r.list(ctx, "blobs/", func(o minio.ObjectInfo) error {
			m.all = append(m.all, o)
			return nil
		})
	}
	if err != nil {
		return nil, err
	}
	for d := range m.manifests {
		enc, err := r.GetManifest(ctx, d)
		if errs.ClassOf(err) == errs.NotFound {
			return nil, errs.New(errs.IntegrityError, "s3", "manifest %s is named but missing from %s; gc deletes nothing", d.Short(), r.url)
		}
		if err != nil {
			return nil, err
		}
		man, err := objects.DecodeManifest(enc)
		if err != nil {
			return nil, err
		}
		for _, b := range man.Blobs() {
			m.blobs[b] = true
		}
	}
	return m, r.markPacks(ctx, m)
}

// markPacks keeps every pack that holds a live blob, whole: its dead
// blobs cost bytes, never a request. An index gc cannot read stops it.
func (r *Remote) markPacks(ctx context.Context, m *marked) error {
	return r.list(ctx, "packs/", func(o minio.ObjectInfo) error {
		m.all = append(m.all, o)
		h, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, r.prefix+"packs/"), ".idx")
		if _, err := objects.ParseDigest(h); !ok || err != nil {
			return nil
		}
		ds, _, err := r.readPackIndex(ctx, h)
		if err != nil {
			return errs.Wrap(errs.ClassOf(err), "s3", err, "gc deletes nothing")
		}
		for _, d := range ds {
			if m.blobs[d] {
				m.packs[h] = true
				break
			}
		}
		return nil
	})
}

// live reports whether the object at key must stay.
func (r *Remote) live(m *marked, key string) bool {
	if rest, ok := strings.CutPrefix(key, r.prefix+"manifests/"); ok {
		d, err := objects.ParseDigest(rest)
		return err != nil || m.manifests[d] // a name gc did not write: keep
	}
	if rest, ok := strings.CutPrefix(key, r.prefix+"blobs/"); ok {
		dir, h, _ := strings.Cut(rest, "/")
		d, err := objects.ParseDigest(h)
		return err != nil || dir != h[:2] || m.blobs[d] // a name gc did not write: keep
	}
	if rest, ok := strings.CutPrefix(key, r.prefix+"packs/"); ok {
		h, ok := strings.CutSuffix(rest, ".idx")
		if !ok {
			h, ok = strings.CutSuffix(rest, ".pack")
		}
		_, err := objects.ParseDigest(h)
		return !ok || err != nil || m.packs[h] // a name gc did not write: keep
	}
	return true
}

// PlanGC plans a gc; nothing changes. A grace of zero or less deletes
// unreferenced objects of any age.
func (r *Remote) PlanGC(ctx context.Context, grace time.Duration) (*GCPlan, error) {
	now := time.Now()
	m, err := r.mark(ctx, grace, now)
	if err != nil {
		return nil, err
	}
	p := &GCPlan{Refs: m.refs, Tags: m.tags, LiveBlobs: len(m.blobs), Grace: grace.String(), graceDuration: grace}
	for _, o := range m.all {
		if strings.HasPrefix(o.Key, r.prefix+"manifests/") {
			p.Manifests++
		}
		if r.live(m, o.Key) {
			continue
		}
		obj := GCObject{Key: o.Key, Size: o.Size, Modified: o.LastModified.UTC()}
		if now.Sub(o.LastModified) < grace {
			p.KeptYoung = append(p.KeptYoung, obj)
			continue
		}
		p.Delete = append(p.Delete, obj)
		p.DeleteBytes += o.Size
	}
	return p, nil
}

// ExecuteGC deletes what p plans, after marking again: an object that has
// become live since the plan (a push committed meanwhile) is spared.
// Manifests go first, so a gc stopped midway leaves only unreferenced blobs;
// a pack's index goes before the pack, so no index names a missing pack.
func (r *Remote) ExecuteGC(ctx context.Context, p *GCPlan) (*GCResult, error) {
	m, err := r.mark(ctx, p.graceDuration, time.Now())
	if err != nil {
		return nil, err
	}
	res := &GCResult{}
	var del []GCObject
	for _, pass := range []string{"manifests/", "blobs/", "packs/*.idx", "packs/*.pack"} {
		dir, suffix, _ := strings.Cut(pass, "*")
		for _, o := range p.Delete {
			if strings.HasPrefix(o.Key, r.prefix+dir) && strings.HasSuffix(o.Key, suffix) {
				del = append(del, o)
			}
		}
	}
	var failed []error
	for _, o := range del {
		if r.live(m, o.Key) {
			res.Spared++
			continue
		}
		if err := r.c.RemoveObject(ctx, r.bucket, o.Key, minio.RemoveObjectOptions{}); err != nil {
			res.FailedDeletes = append(res.FailedDeletes, o.Key)
			failed = append(failed, err)
			continue
		}
		res.Deleted++
		res.FreedBytes += o.Size
	}
	if len(failed) > 0 {
		return res, fmt.Errorf("s3: gc of %s: %d deletes failed (run gc again): %w", r.url, len(failed), errors.Join(failed...))
	}
	return res, nil
}

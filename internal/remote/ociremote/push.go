package ociremote

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"sync/atomic"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"

	"github.com/mstore/mstore/internal/errs"
	ocilayout "github.com/mstore/mstore/internal/layouts/oci"
	"github.com/mstore/mstore/internal/layouts/oci/modelpack"
	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/progress"
	"github.com/mstore/mstore/internal/remote/transfer"
	"github.com/mstore/mstore/internal/store"
)

// PushOptions say what to push.
type PushOptions struct {
	// Version is the local version (any name resolve takes).
	Version string
	// MountFrom are other repositories of the registry to mount layers
	// from before uploading them.
	MountFrom []string
	// Jobs bounds the layers in flight; zero means 4.
	Jobs     int
	Progress progress.Reporter
}

// Push uploads a local version as a ModelPack artifact under the URL's tag:
// the layers the registry lacks, the config and map, then the manifest
// under the tag. A tag naming another version is a conflict.
func Push(ctx context.Context, st *store.Store, r *Remote, o PushOptions) (*transfer.Result, error) {
	start := time.Now()
	tag := r.ref.Tag
	if tag == "" || r.ref.Digest != "" {
		return nil, errs.New(errs.SchemaError, pkg, "push names a tag: %s:TAG (a registry cannot move a ref by compare-and-swap, so mstore only creates tags there)", r.where())
	}
	d, err := names.Resolve(st, o.Version)
	if err != nil {
		return nil, err
	}
	res := &transfer.Result{Name: r.ref.Repo, Tag: tag, Digest: d, Remote: r.ref.String()}
	if same, err := r.checkTag(ctx, tag, d); err != nil || same {
		res.Seconds = time.Since(start).Seconds()
		return res, err
	}
	v, lock, err := st.ReadVersion(d, true) // held shared: gc waits until the blobs are read
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	m, enc, recs := v.Manifest, v.Encoded, v.Records
	if o.Progress != nil {
		o.Progress.Start(m.LogicalBytes())
		defer o.Progress.Finish()
	}
	files := make([]modelpack.File, len(m.Files))
	var moved, present, bytesMoved atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(o.Jobs, 1))
	if o.Jobs <= 0 {
		g.SetLimit(4)
	}
	for i, f := range m.Files {
		g.Go(func() error {
			open := func() io.ReadCloser { return ocilayout.OpenFile(st, m, &m.Files[i], recs) }
			sum, err := sha256Of(open())
			if err != nil {
				return err
			}
			files[i] = modelpack.File{Path: f.Path, Size: f.Size, SHA256: sum, Digest: f.Digest}
			desc := ocispec.Descriptor{MediaType: modelpack.MediaTypeFor(f), Digest: sum, Size: f.Size}
			up, err := r.putBlob(gctx, desc, open, o.MountFrom)
			if err != nil {
				return err
			}
			if up {
				moved.Add(1)
				bytesMoved.Add(f.Size)
			} else {
				present.Add(1)
			}
			if o.Progress != nil {
				o.Progress.Add(f.Size)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	cfg, mp, man, err := modelpack.Build(r.ref.Repo, d, m, enc, files)
	if err != nil {
		return nil, err
	}
	for _, b := range []modelpack.Blob{cfg, mp} {
		up, err := r.putBlob(ctx, b.Desc, func() io.ReadCloser { return io.NopCloser(b.Open()) }, nil)
		if err != nil {
			return nil, err
		}
		if up {
			moved.Add(1)
			bytesMoved.Add(b.Desc.Size)
		} else {
			present.Add(1)
		}
	}
	// Check again just before the write: the window in which a racing push
	// can take the tag is this one request long (a registry offers no
	// conditional write).
	if same, err := r.checkTag(ctx, tag, d); err != nil || same {
		return res, err
	}
	if err := r.repo.PushReference(ctx, man.Desc, bytes.NewReader(man.Data), tag); err != nil {
		return nil, classify(err, "push the manifest of %s:%s", r.where(), tag)
	}
	res.TagCreated = true
	res.BlobsMoved, res.BlobsPresent, res.BytesMoved = int(moved.Load())+1, int(present.Load()), bytesMoved.Load()+man.Desc.Size
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// checkTag reads tag on the registry: same is true when it names version d
// already; a tag naming anything else is a conflict.
func (r *Remote) checkTag(ctx context.Context, tag string, d objects.Digest) (same bool, err error) {
	a, desc, err := r.fetchArtifact(ctx, tag)
	if errs.ClassOf(err) == errs.NotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if a.Manifest.Annotations[modelpack.AnnotationDigest] == d.String() {
		return true, nil
	}
	return false, errs.New(errs.Conflict, pkg, "%s:%s already names %s (mstore version %q); tags never move: choose another tag", r.where(), tag, desc.Digest, a.Manifest.Annotations[modelpack.AnnotationDigest])
}

// putBlob uploads a blob the registry lacks (HEAD first; a mount from
// another repository when one is named); uploaded is false when nothing
// was sent. The registry checks the digest of what it receives.
func (r *Remote) putBlob(ctx context.Context, desc ocispec.Descriptor, open func() io.ReadCloser, mountFrom []string) (uploaded bool, err error) {
	has, err := r.repo.Exists(ctx, desc)
	if err != nil {
		return false, classify(err, "ask %s for blob %s", r.where(), desc.Digest)
	}
	if has {
		return false, nil
	}
	for _, from := range mountFrom {
		sent := false
		err := r.repo.Mount(ctx, desc, from, func() (io.ReadCloser, error) {
			sent = true
			return open(), nil // oras closes it
		})
		if err == nil {
			return sent, nil
		}
		if !sent {
			continue // that repository does not have it
		}
		return true, classify(err, "upload blob %s to %s", desc.Digest, r.where())
	}
	rd := open()
	defer rd.Close()
	if err := r.repo.Push(ctx, desc, rd); err != nil {
		return true, classify(err, "upload blob %s to %s", desc.Digest, r.where())
	}
	return true, nil
}

func sha256Of(rd io.ReadCloser) (digest.Digest, error) {
	defer rd.Close()
	h := sha256.New()
	if _, err := io.Copy(h, rd); err != nil {
		return "", err
	}
	return digest.NewDigest(digest.SHA256, h), nil
}

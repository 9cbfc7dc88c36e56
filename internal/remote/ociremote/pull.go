package ociremote

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/errs"
	ocilayout "github.com/mstore/mstore/internal/layouts/oci"
	"github.com/mstore/mstore/internal/layouts/oci/modelpack"
	"github.com/mstore/mstore/internal/remote/transfer"
	"github.com/mstore/mstore/internal/store"
)

// Pull takes in the version the URL names, as transfer.Pull does from any
// remote, under the repository's name (or po.As): REPO:TAG also records
// the tag locally; a pinned digest or no tag moves only the ref. An
// artifact another tool pushed (no map layer) is fetched whole into a temp
// OCI layout and added from there (pullForeign).
func Pull(ctx context.Context, st *store.Store, r *Remote, po transfer.PullOptions) (*transfer.Result, error) {
	po.Version = r.ref.Repo
	if r.ref.Tag != "" && r.ref.Digest == "" {
		po.Version += ":" + r.ref.Tag
	}
	if po.RemoteName == "" {
		po.RemoteName = r.ref.String()
	}
	res, err := transfer.Pull(ctx, st, r, po)
	if errors.Is(err, errForeign) {
		return r.pullForeign(ctx, st, po)
	}
	return res, err
}

// pullForeign fetches every blob of an artifact without mstore's map into
// a temp OCI layout (each checked against its sha256 as it is written) and
// adds that layout: all of it moves, every time, as nothing says which of
// its files the store has.
func (r *Remote) pullForeign(ctx context.Context, st *store.Store, po transfer.PullOptions) (*transfer.Result, error) {
	start := time.Now()
	a, desc, mb, err := r.fetchManifest(ctx, r.ref.Reference())
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "mstore-oci-pull-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	blobs := filepath.Join(dir, ocispec.ImageBlobsDir, "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return nil, err
	}
	res := &transfer.Result{Remote: po.RemoteName}
	if err := os.WriteFile(filepath.Join(blobs, desc.Digest.Encoded()), mb, 0o644); err != nil {
		return nil, err
	}
	descs := []ocispec.Descriptor{a.Manifest.Config}
	for _, l := range a.Layers {
		descs = append(descs, l.Desc)
	}
	for _, d := range descs {
		if err := r.download(ctx, d, filepath.Join(blobs, d.Digest.Encoded())); err != nil {
			return nil, err
		}
		res.BlobsMoved++
		res.BytesMoved += d.Size
	}
	idx := ocispec.Index{Manifests: []ocispec.Descriptor{{MediaType: desc.MediaType, ArtifactType: a.Manifest.ArtifactType, Digest: desc.Digest, Size: desc.Size}}}
	idx.SchemaVersion = 2
	ib, _ := json.Marshal(idx)
	if err := os.WriteFile(filepath.Join(dir, ocispec.ImageIndexFile), ib, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, ocispec.ImageLayoutFile), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		return nil, err
	}
	name := po.As
	if name == "" {
		name = r.ref.Repo
	}
	tag := ""
	if r.ref.Digest == "" {
		tag = r.ref.Tag
	}
	ar, err := ocilayout.Add(ctx, st, dir, archiver.Options{Name: name, Tag: tag, Message: "pull " + po.RemoteName, Progress: po.Progress})
	if err != nil {
		return nil, err
	}
	res.Name, res.Tag, res.Digest, res.RefMoved, res.TagCreated = ar.Name, ar.Tag, ar.Digest, ar.Moved, tag != ""
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// download streams blob d into the new file p, checking its size and
// sha256.
func (r *Remote) download(ctx context.Context, d ocispec.Descriptor, p string) error {
	if err := modelpack.CheckDescriptor(d, modelpack.MaxFileBytes, "blob "+d.Digest.String()); err != nil {
		return err
	}
	rc, err := r.repo.Blobs().Fetch(ctx, d)
	if err != nil {
		return classify(err, "fetch blob %s", d.Digest)
	}
	defer rc.Close()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(rc, d.Size+1))
	if err != nil {
		return classify(err, "fetch blob %s", d.Digest)
	}
	if got := digest.NewDigest(digest.SHA256, h); n != d.Size || got != d.Digest {
		return errs.New(errs.IntegrityError, pkg, "blob %s from %s: %d bytes hashing to %s", d.Digest, r.where(), n, got)
	}
	return f.Close()
}

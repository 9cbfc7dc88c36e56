package oci

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/layouts/oci/modelpack"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/restorer"
	"github.com/mstore/mstore/internal/store"
)

// CheckoutOptions say how to write a layout.
type CheckoutOptions struct {
	// Name is the model's name in its config; Tag, if set, names the
	// manifest in index.json (org.opencontainers.image.ref.name).
	Name, Tag string
	// Restore are the restorer's options (format options apply: the
	// layout holds the files they give). Force is refused.
	Restore restorer.Options
}

// Result describes a written layout.
type Result struct {
	Digest   objects.Digest `json:"digest"`
	Dest     string         `json:"dest"`
	Layout   string         `json:"layout"`
	Manifest digest.Digest  `json:"oci_manifest"`
	Files    int            `json:"files"`
	Bytes    int64          `json:"bytes"`
}

// Checkout writes version d of st as an OCI image layout at dest, which
// must not exist or be an empty directory.
func Checkout(ctx context.Context, st *store.Store, d objects.Digest, dest string, o CheckoutOptions) (*Result, error) {
	if o.Restore.Force {
		return nil, errs.New(errs.Conflict, pkg, "--force is not taken with --layout oci: choose a new destination")
	}
	if o.Restore.Format != "" || o.Restore.MaxShardSize > 0 || len(o.Restore.Tensors) > 0 || o.Restore.DType != "" {
		// The layout holds other files than the version's: no map (its
		// files would not be the mstore manifest's).
		return nil, errs.New(errs.LossyConversion, pkg, "--layout oci writes the version as added (its map layer names the version's own files); check out the converted model, add it, then write that")
	}
	dest, err := filepath.Abs(dest)
	if err != nil {
		return nil, err
	}
	if err := checkEmpty(dest); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".oci-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp) // only the temp tree this checkout made
	model := filepath.Join(tmp, "model")
	if _, err := restorer.Checkout(ctx, st, d, model, o.Restore); err != nil {
		return nil, err
	}
	var m *objects.Manifest
	var enc []byte
	if err := st.View(func(tx *bolt.Tx) (err error) {
		m, err = store.Manifest(tx, d)
		enc = store.ManifestBytes(tx, d)
		return err
	}); err != nil {
		return nil, err
	}
	out := filepath.Join(tmp, "layout")
	blobs := filepath.Join(out, ocispec.ImageBlobsDir, "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return nil, err
	}
	files := make([]modelpack.File, len(m.Files))
	for i, f := range m.Files {
		sum, err := moveToBlob(filepath.Join(model, filepath.FromSlash(f.Path)), blobs)
		if err != nil {
			return nil, err
		}
		files[i] = modelpack.File{Path: f.Path, Size: f.Size, SHA256: sum, Digest: f.Digest}
	}
	cfg, mp, man, err := modelpack.Build(o.Name, d, m, enc, files)
	if err != nil {
		return nil, err
	}
	for _, b := range []modelpack.Blob{cfg, mp, man} {
		if err := writeSynced(filepath.Join(blobs, b.Desc.Digest.Encoded()), b.Data); err != nil {
			return nil, err
		}
	}
	desc := man.Desc
	if o.Tag != "" {
		desc.Annotations = map[string]string{ocispec.AnnotationRefName: o.Tag}
	}
	idx := ocispec.Index{MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{desc}}
	idx.SchemaVersion = 2
	ib, err := json.Marshal(idx)
	if err != nil {
		return nil, err
	}
	if err := writeSynced(filepath.Join(out, ocispec.ImageIndexFile), ib); err != nil {
		return nil, err
	}
	if err := writeSynced(filepath.Join(out, ocispec.ImageLayoutFile), []byte(layoutFile)); err != nil {
		return nil, err
	}
	for _, dir := range []string{blobs, filepath.Dir(blobs), out} {
		if err := syncDir(dir); err != nil {
			return nil, err
		}
	}
	if err := os.Rename(out, dest); err != nil { // an empty dest directory is replaced
		return nil, errs.Wrap(errs.Conflict, pkg, err, "%s appeared meanwhile", dest)
	}
	if err := syncDir(filepath.Dir(dest)); err != nil {
		return nil, err
	}
	return &Result{Digest: d, Dest: dest, Layout: Name, Manifest: man.Desc.Digest, Files: len(m.Files), Bytes: m.LogicalBytes()}, nil
}

// checkEmpty refuses a destination that exists and is not an empty
// directory.
func checkEmpty(dest string) error {
	ents, err := os.ReadDir(dest)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil || len(ents) > 0 {
		return errs.New(errs.Conflict, pkg, "%s exists and is not an empty directory; choose a new destination", dest)
	}
	return nil
}

// moveToBlob hashes the restored file p and renames it to its sha256 name
// under blobs; a file whose bytes are there already is dropped.
func moveToBlob(p, blobs string) (digest.Digest, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		return "", err
	}
	sum := digest.NewDigest(digest.SHA256, h)
	to := filepath.Join(blobs, sum.Encoded())
	if _, err := os.Lstat(to); err == nil {
		return sum, os.Remove(p)
	}
	return sum, os.Rename(p, to)
}

// writeSynced writes b to a new file p and syncs it.
func writeSynced(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if os.IsExist(err) {
			return nil // the same digest, the same bytes
		}
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%s: sync: %w", pkg, err)
	}
	return nil
}

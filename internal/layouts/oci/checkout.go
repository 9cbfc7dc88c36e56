package oci

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	mlayout "github.com/mstore/mstore/internal/layouts/layout"
	"github.com/mstore/mstore/internal/layouts/oci/modelpack"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/restorer"
	"github.com/mstore/mstore/internal/sizes"
	"github.com/mstore/mstore/internal/store"
)

// CheckoutOptions say how to write a layout: Name is the model's name in
// its config; Tag, if set, names the manifest in index.json
// (org.opencontainers.image.ref.name); Force is refused, as a layout
// replaces no destination.
type CheckoutOptions = mlayout.ExportOptions

// Result describes a written layout.
type Result struct {
	Digest   objects.Digest `json:"digest"`
	Dest     string         `json:"dest"`
	Layout   string         `json:"layout"`
	Manifest digest.Digest  `json:"oci_manifest"`
	Files    int            `json:"files"`
	Bytes    int64          `json:"bytes"`
}

// String is the one line checkout prints.
func (r *Result) String() string {
	return fmt.Sprintf("%s → %s: OCI image layout, ModelPack artifact %s, %d files, %s", r.Digest.Short(), r.Dest, r.Manifest, r.Files, sizes.Human(r.Bytes))
}

// Checkout writes version d of st as an OCI image layout at dest, which
// must not exist or be an empty directory. Each file is streamed out of
// the store (every blob verified), its BLAKE3 checked against the manifest
// and its sha256 computed on the way, into a temp tree beside dest that
// is synced and renamed into place.
func Checkout(ctx context.Context, st *store.Store, d objects.Digest, dest string, o CheckoutOptions) (*Result, error) {
	if o.Force {
		return nil, errs.New(errs.Conflict, pkg, "--force is not taken with --layout oci: choose a new destination")
	}
	dest, err := filepath.Abs(dest)
	if err != nil {
		return nil, err
	}
	if err := checkEmpty(dest); err != nil {
		return nil, err
	}
	// The manifest's bytes are read again for the map layer, at the end.
	v, lock, err := st.ReadVersion(d, false) // held shared: gc waits until the blobs are read
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	m, recs := v.Manifest, v.Records
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return nil, err
	}
	// A held temp tree beside dest: removed when this checkout fails, and
	// by the next checkout there when this one is killed midway.
	td, err := restorer.NewTempDir(filepath.Dir(dest), filepath.Base(dest)+".oci")
	if err != nil {
		return nil, err
	}
	defer td.Close() // once renamed to dest it is no longer the temp tree: kept
	tmp := td.Path()
	blobs := filepath.Join(tmp, ocispec.ImageBlobsDir, "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return nil, err
	}
	if o.Progress != nil {
		o.Progress.Start(m.LogicalBytes())
		defer o.Progress.Finish()
	}
	files := make([]modelpack.File, len(m.Files))
	for i := range m.Files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f := &m.Files[i]
		sum, err := writeFileBlob(st, m, f, recs, blobs)
		if err != nil {
			return nil, err
		}
		files[i] = modelpack.File{Path: f.Path, Size: f.Size, SHA256: sum, Digest: f.Digest}
		if o.Progress != nil {
			o.Progress.Add(f.Size)
		}
	}
	var enc []byte
	if err := st.View(func(tx *bolt.Tx) (err error) {
		if enc, err = st.ManifestBytes(tx, d); err == nil && enc == nil { // gc waits on the lock held
			err = errs.New(errs.IntegrityError, pkg, "manifest %s left the store during the checkout (run `mstore fsck`)", d.Short())
		}
		return err
	}); err != nil {
		return nil, err
	}
	cfg, mp, man, err := modelpack.Build(o.Name, d, m, enc, files)
	if err != nil {
		return nil, err
	}
	for _, b := range []modelpack.Blob{cfg, mp, man} {
		if err := writeSynced(filepath.Join(blobs, b.Desc.Digest.Encoded()), b.Open()); err != nil {
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
	if err := writeSynced(filepath.Join(tmp, ocispec.ImageIndexFile), bytes.NewReader(ib)); err != nil {
		return nil, err
	}
	if err := writeSynced(filepath.Join(tmp, ocispec.ImageLayoutFile), strings.NewReader(layoutFile)); err != nil {
		return nil, err
	}
	for _, dir := range []string{blobs, filepath.Dir(blobs), tmp} {
		if err := syncDir(dir); err != nil {
			return nil, err
		}
	}
	if err := os.Rename(tmp, dest); err != nil { // an empty dest directory is replaced
		return nil, errs.Wrap(errs.Conflict, pkg, err, "%s appeared meanwhile", dest)
	}
	if err := syncDir(filepath.Dir(dest)); err != nil {
		return nil, err
	}
	return &Result{Digest: d, Dest: dest, Layout: Name, Manifest: man.Desc.Digest, Files: len(m.Files), Bytes: m.LogicalBytes()}, nil
}

// writeFileBlob streams file f into blobs under its sha256, checking its
// size against the manifest; a file whose bytes are there already (the
// same bytes under two paths) is written once. The file is not hashed
// with BLAKE3 again: OpenFile verifies every blob it reads, and the
// verified blobs at the manifest's offsets are the file add hashed, as a
// checkout in the manifest's own layout relies on (restorer/copy.go).
func writeFileBlob(st *store.Store, m *objects.Manifest, f *objects.File, recs map[objects.Digest]store.BlobRecord, blobs string) (digest.Digest, error) {
	out, err := os.CreateTemp(blobs, ".file-")
	if err != nil {
		return "", err
	}
	defer os.Remove(out.Name()) // gone once renamed
	defer out.Close()
	in := OpenFile(st, m, f, recs)
	defer in.Close()
	sh := sha256.New()
	buffered := bufio.NewWriterSize(out, 1<<20)
	n, err := io.CopyBuffer(io.MultiWriter(buffered, sh), in, make([]byte, 1<<20))
	if err == nil {
		err = buffered.Flush()
	}
	if err != nil {
		return "", err
	}
	if n != f.Size {
		return "", errs.New(errs.IntegrityError, pkg, "%s: rebuilt %d bytes, the manifest says %d", f.Path, n, f.Size)
	}
	if err := out.Chmod(0o644); err != nil { // CreateTemp makes it 0600
		return "", err
	}
	if err := out.Sync(); err != nil {
		return "", err
	}
	sum := digest.NewDigest(digest.SHA256, sh)
	return sum, os.Rename(out.Name(), filepath.Join(blobs, sum.Encoded()))
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

// writeSynced writes what r reads to a new file p and syncs it.
func writeSynced(p string, r io.Reader) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if os.IsExist(err) {
			return nil // the same digest, the same bytes
		}
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
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

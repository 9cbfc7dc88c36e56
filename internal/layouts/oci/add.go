package oci

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/layouts/oci/modelpack"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/remote/transfer"
	"github.com/mstore/mstore/internal/store"
)

// Add takes in the ModelPack artifact of the OCI image layout dir. The
// name defaults to the model config's name, else dir's base name.
func Add(ctx context.Context, st *store.Store, dir string, o archiver.Options) (*archiver.Result, error) {
	l, err := openLayout(dir)
	if err != nil {
		return nil, err
	}
	defer l.close()
	a, _, err := l.manifest()
	if err != nil {
		return nil, err
	}
	cfg, err := l.readBlob(a.Manifest.Config, modelpack.MaxDocumentBytes)
	if err != nil {
		return nil, err
	}
	if o.Name == "" {
		o.Name = archiver.DefaultName(dir)
		if n := modelpack.ConfigName(cfg); n != "" {
			if _, err := refs.ParseName(n); err == nil {
				o.Name = n
			}
		}
	}
	if a.Map == nil {
		return addForeign(ctx, st, l, a, o)
	}
	mb, err := l.readBlob(*a.Map, modelpack.MaxMapBytes)
	if err != nil {
		return nil, err
	}
	mp, m, err := modelpack.DecodeMap(mb, a)
	if err != nil {
		return nil, err
	}
	for _, ly := range a.Layers {
		if err := l.verifyBlob(ly.Desc); err != nil {
			return nil, err
		}
	}
	src := modelpack.NewSource(dir, o.Name, o.Tag, mp, m, l.readRange)
	version := o.Name
	if o.Tag != "" {
		version += ":" + o.Tag
	}
	if o.Message == "" {
		o.Message = "add of the OCI layout " + dir
	}
	res, err := transfer.Pull(ctx, st, src, transfer.PullOptions{Version: version, RemoteName: dir, Message: o.Message, Progress: o.Progress})
	if err != nil {
		return nil, err
	}
	return &archiver.Result{Name: res.Name, Tag: res.Tag, Digest: res.Digest, Format: m.Format, Files: len(m.Files),
		Tensors: len(m.Tensors), LogicalBytes: m.LogicalBytes(), NewBytes: res.BytesMoved, NewBlobs: res.BlobsMoved, Moved: res.RefMoved}, nil
}

// readRange reads n bytes at off of a blob of the layout.
func (l *layout) readRange(_ context.Context, layer digest.Digest, off, n int64) ([]byte, error) {
	f, size, err := l.open(blobName(layer))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if off < 0 || n < 0 || off+n > size {
		return nil, errs.New(errs.IntegrityError, pkg, "blob %s has %d bytes, too few for %d+%d", layer, size, off, n)
	}
	b := make([]byte, n)
	_, err = f.ReadAt(b, off)
	return b, err
}

// addForeign takes in an artifact without mstore's map (another tool's):
// its files are unpacked, each layer checked against its sha256 as it is
// read, into a temp directory that is then added as a model directory.
func addForeign(ctx context.Context, st *store.Store, l *layout, a *modelpack.Artifact, o archiver.Options) (*archiver.Result, error) {
	stage, err := os.MkdirTemp("", "mstore-oci-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	root, err := os.OpenRoot(stage)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	for _, ly := range a.Layers {
		if err := l.unpack(root, ly); err != nil {
			return nil, err
		}
	}
	if o.Message == "" {
		o.Message = "add of the OCI layout " + l.dir
	}
	return archiver.Add(ctx, st, stage, o)
}

// unpack writes the files of one layer under root, checking the layer's
// size and sha256 on the way.
func (l *layout) unpack(root *os.Root, ly modelpack.Layer) error {
	f, size, err := l.open(blobName(ly.Desc.Digest))
	if err != nil {
		return err
	}
	defer f.Close()
	if size != ly.Desc.Size {
		return errs.New(errs.IntegrityError, pkg, "blob %s has %d bytes, its descriptor says %d", ly.Desc.Digest, size, ly.Desc.Size)
	}
	h := sha256.New()
	in := io.TeeReader(io.LimitReader(f, size), h)
	switch ly.Kind {
	case modelpack.LayerRaw:
		err = writeFile(root, ly.Path, in, size)
	case modelpack.LayerTar:
		err = untar(root, in, size)
	case modelpack.LayerTarGzip:
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(in); err == nil {
			err = untar(root, zr, maxUnpacked)
		}
	}
	if err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, in); err != nil { // hash what the tar left
		return err
	}
	if got := digest.NewDigest(digest.SHA256, h); got != ly.Desc.Digest {
		return errs.New(errs.IntegrityError, pkg, "layer %s (%s) hashes to %s: the layout's digest lies", ly.Desc.Digest, ly.Path, got)
	}
	return nil
}

// maxUnpacked bounds what one compressed layer may unpack to.
const maxUnpacked = modelpack.MaxFileBytes

// writeFile writes the n bytes of r to root/p, refusing a path already
// written or one that leaves root.
func writeFile(root *os.Root, p string, r io.Reader, n int64) error {
	if !objects.IsCleanPath(p) {
		return errs.New(errs.PathTraversal, pkg, "file path %q leaves the model directory", p)
	}
	if dir := filepath.Dir(filepath.FromSlash(p)); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return errs.Wrap(errs.SchemaError, pkg, err, "file %q", p)
		}
	}
	out, err := root.OpenFile(filepath.FromSlash(p), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return errs.Wrap(errs.SchemaError, pkg, err, "file %q given twice, or under another file", p)
	}
	defer out.Close()
	got, err := io.Copy(out, io.LimitReader(r, n))
	if err == nil && got != n {
		err = errs.New(errs.InvalidArchive, pkg, "file %q: %d bytes, want %d", p, got, n)
	}
	return err
}

// untar writes the regular files of a tar layer under root; directories
// are made as needed, anything else is refused.
func untar(root *os.Root, r io.Reader, limit int64) error {
	tr := tar.NewReader(r)
	var total int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return errs.Wrap(errs.InvalidArchive, pkg, err, "a tar layer")
		}
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		switch h.Typeflag {
		case tar.TypeDir:
			if !objects.IsCleanPath(name) {
				return errs.New(errs.PathTraversal, pkg, "tar entry %q leaves the model directory", h.Name)
			}
			continue
		case tar.TypeReg:
		default:
			return errs.New(errs.PathTraversal, pkg, "tar entry %q is a link or a special file; a model layer holds regular files", h.Name)
		}
		if total += h.Size; h.Size < 0 || total > limit {
			return errs.New(errs.SizeLimitExceeded, pkg, "tar layer unpacks past %d bytes", limit)
		}
		if err := writeFile(root, name, tr, h.Size); err != nil {
			return err
		}
	}
}

package oci

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/errs"
	mlayout "github.com/mstore/mstore/internal/layouts/layout"
	"github.com/mstore/mstore/internal/layouts/oci/modelpack"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
)

const pkg = "layouts/oci"

// Name is the layout's name on the command line (checkout --layout oci).
const Name = "oci"

// Layout is the OCI image layout in the layouts registry: a version
// layout, imported and exported whole (its map layer keeps mstore's
// manifest).
var Layout mlayout.VersionLayout = ociLayout{}

type ociLayout struct{}

func (ociLayout) Name() string            { return Name }
func (ociLayout) Detect(path string) bool { return Detect(path) }

func (ociLayout) Import(ctx context.Context, st *store.Store, path string, o archiver.Options) (*archiver.Result, error) {
	return Add(ctx, st, path, o)
}

func (ociLayout) Export(ctx context.Context, st *store.Store, d objects.Digest, dest string, o mlayout.ExportOptions) (mlayout.Exported, error) {
	return Checkout(ctx, st, d, dest, o)
}

const layoutFile = `{"imageLayoutVersion":"1.0.0"}`

// Detect reports whether dir is an OCI image layout: it holds the files
// oci-layout and index.json.
func Detect(dir string) bool {
	for _, f := range []string{ocispec.ImageLayoutFile, ocispec.ImageIndexFile} {
		info, err := os.Lstat(filepath.Join(dir, f))
		if err != nil || !info.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// layout is an OCI image layout being read.
type layout struct {
	dir  string
	root *os.Root
}

func openLayout(dir string) (*layout, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, errs.Wrap(errs.NotFound, pkg, err, "open %s", dir)
	}
	return &layout{dir: dir, root: root}, nil
}

func (l *layout) close() { l.root.Close() }

// open opens a regular file of the layout, refusing links and specials.
func (l *layout) open(name string) (*os.File, int64, error) {
	info, err := l.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, errs.New(errs.NotFound, pkg, "%s: the layout has no %s", l.dir, name)
	}
	if err != nil {
		return nil, 0, err
	}
	if !info.Mode().IsRegular() {
		return nil, 0, errs.New(errs.PathTraversal, pkg, "%s in %s is a link or a special file, not a regular file", name, l.dir)
	}
	f, err := l.root.Open(name)
	return f, info.Size(), err
}

// readSmall reads a whole document of at most limit bytes.
func (l *layout) readSmall(name string, limit int64) ([]byte, error) {
	f, size, err := l.open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size > limit {
		return nil, errs.New(errs.SizeLimitExceeded, pkg, "%s is %d bytes (at most %d)", name, size, limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = errs.New(errs.SizeLimitExceeded, pkg, "%s grew past %d bytes", name, limit)
	}
	return b, err
}

func blobName(d digest.Digest) string {
	return filepath.Join(ocispec.ImageBlobsDir, d.Algorithm().String(), d.Encoded())
}

// readBlob reads a whole small blob and checks it against its descriptor.
func (l *layout) readBlob(desc ocispec.Descriptor, limit int64) ([]byte, error) {
	if err := modelpack.CheckDescriptor(desc, limit, "blob "+desc.Digest.String()); err != nil {
		return nil, err
	}
	b, err := l.readSmall(blobName(desc.Digest), limit)
	if err != nil {
		return nil, err
	}
	return b, checkBytes(b, desc)
}

// checkBytes refuses bytes that are not what desc names.
func checkBytes(b []byte, desc ocispec.Descriptor) error {
	if int64(len(b)) != desc.Size {
		return errs.New(errs.IntegrityError, pkg, "blob %s has %d bytes, its descriptor says %d", desc.Digest, len(b), desc.Size)
	}
	if got := digest.FromBytes(b); got != desc.Digest {
		return errs.New(errs.IntegrityError, pkg, "blob %s hashes to %s: the layout's digest lies", desc.Digest, got)
	}
	return nil
}

// verifyBlob streams a blob through sha256 and checks it against desc.
func (l *layout) verifyBlob(desc ocispec.Descriptor) error {
	f, size, err := l.open(blobName(desc.Digest))
	if err != nil {
		return err
	}
	defer f.Close()
	if size != desc.Size {
		return errs.New(errs.IntegrityError, pkg, "blob %s has %d bytes, its descriptor says %d", desc.Digest, size, desc.Size)
	}
	return hashCheck(f, desc)
}

// hashCheck reads r to its end and checks its size and sha256 against desc.
func hashCheck(r io.Reader, desc ocispec.Descriptor) error {
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(r, desc.Size+1))
	if err != nil {
		return err
	}
	got := digest.NewDigest(digest.SHA256, h)
	if n != desc.Size || got != desc.Digest {
		return errs.New(errs.IntegrityError, pkg, "blob %s: %d bytes hashing to %s, want %d bytes: the layout's digest lies", desc.Digest, n, got, desc.Size)
	}
	return nil
}

// manifest finds the one ModelPack manifest of the layout's index.
func (l *layout) manifest() (*modelpack.Artifact, ocispec.Descriptor, error) {
	var none ocispec.Descriptor
	b, err := l.readSmall(ocispec.ImageLayoutFile, 4096)
	if err != nil {
		return nil, none, err
	}
	var lf ocispec.ImageLayout
	if err := json.Unmarshal(b, &lf); err != nil || lf.Version != ocispec.ImageLayoutVersion {
		return nil, none, errs.New(errs.UnsupportedVersion, pkg, "%s: oci-layout %q: want imageLayoutVersion %s", l.dir, b, ocispec.ImageLayoutVersion)
	}
	if b, err = l.readSmall(ocispec.ImageIndexFile, modelpack.MaxDocumentBytes); err != nil {
		return nil, none, err
	}
	var idx ocispec.Index
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, none, errs.Wrap(errs.SchemaError, pkg, err, "%s: index.json", l.dir)
	}
	var found []ocispec.Descriptor
	for _, d := range idx.Manifests {
		if d.MediaType == ocispec.MediaTypeImageManifest && (d.ArtifactType == "" || d.ArtifactType == modelpack.ArtifactType) {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		return nil, none, errs.New(errs.SchemaError, pkg, "%s: index.json lists %d image manifests; add takes a layout of exactly one ModelPack artifact", l.dir, len(found))
	}
	mb, err := l.readBlob(found[0], modelpack.MaxDocumentBytes)
	if err != nil {
		return nil, none, err
	}
	a, err := modelpack.Parse(mb)
	return a, found[0], err
}

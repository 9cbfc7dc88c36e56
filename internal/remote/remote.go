package remote

import (
	"context"
	"fmt"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// MaxBatchBlobs and MaxBatchBytes bound one GetBlobs or PutBlobs call, so
// that one request of an HTTP remote stays bounded in memory.
const (
	MaxBatchBlobs = 4096
	MaxBatchBytes = 16 << 20
	// MaxHasBlobs bounds one HasBlobs call.
	MaxHasBlobs = 16384
	// MaxManifestBytes bounds a manifest a remote accepts or returns.
	MaxManifestBytes = 256 << 20
)

// Blob is a blob's digest and bytes.
type Blob struct {
	Digest objects.Digest
	Data   []byte
}

// RefInfo is a ref of a remote: its current target and its history.
type RefInfo struct {
	Name    string
	Current objects.Digest
	// History lists every digest the ref has pointed at, newest first;
	// its first element is Current. A pinned pull checks against it.
	History []objects.Digest
}

// Remote is another store. Every method is safe for concurrent use.
//
// Bytes returned by GetBlob and GetBlobs are not trusted: the caller checks
// them against their digest before using them (transfer does).
type Remote interface {
	// HasBlobs reports, for each of ds (at most MaxHasBlobs), whether the
	// remote has that blob.
	HasBlobs(ctx context.Context, ds []objects.Digest) ([]bool, error)
	// GetBlob returns n bytes of blob d from offset off; n < 0 means to the
	// end. A blob the remote lacks is not_found.
	GetBlob(ctx context.Context, d objects.Digest, off, n int64) ([]byte, error)
	// GetBlobs returns many whole blobs at once (at most MaxBatchBlobs,
	// whose sizes the caller keeps under MaxBatchBytes), in the order
	// asked. One the remote lacks is not_found.
	GetBlobs(ctx context.Context, ds []objects.Digest) ([][]byte, error)
	// PutBlobs stores each blob the remote lacks. The receiver checks every
	// blob's bytes against its digest: a mismatch is an integrity_error and
	// stores nothing of that blob.
	PutBlobs(ctx context.Context, blobs []Blob) error
	// GetManifest returns the encoded manifest d (not_found if absent).
	GetManifest(ctx context.Context, d objects.Digest) ([]byte, error)
	// PutManifest stores the encoded manifest d. It is refused (a
	// *MissingBlobsError, not_found) while any blob it needs is missing, and
	// an encoding that does not hash to d is an integrity_error. created
	// is false when the remote had it already.
	PutManifest(ctx context.Context, d objects.Digest, encoded []byte) (created bool, err error)
	// Ref reads the ref name with its history (not_found if none).
	Ref(ctx context.Context, name string) (RefInfo, error)
	// Tag reads the tag name:tag (not_found if none).
	Tag(ctx context.Context, name, tag string) (objects.Digest, error)
	// MoveRef points name at to if it still points at from (zero from: if
	// the ref does not exist); otherwise it is a conflict and nothing
	// changes. The manifest to must be on the remote.
	MoveRef(ctx context.Context, name string, from, to objects.Digest, message string) error
	// CreateTag creates name:tag at d. A tag at d already is no change
	// (created false); at another digest it is a conflict.
	CreateTag(ctx context.Context, name, tag string, d objects.Digest) (created bool, err error)
	// Close releases what the remote holds open.
	Close() error
}

// PushLocker is a remote with no server of its own to order a push
// against its gc (a bucket): a push holds LockPush's lock from before it
// asks HasBlobs until its ref or tag has moved, so that no gc deletes a
// blob the push found present. A gc running is a conflict.
type PushLocker interface {
	LockPush(ctx context.Context) (release func(), err error)
}

// MissingBlobsError refuses a manifest whose blobs are not all present.
type MissingBlobsError struct {
	Manifest objects.Digest
	Missing  []objects.Digest
}

func (e *MissingBlobsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "remote: not_found: manifest %s needs %d blob(s) the remote lacks:", e.Manifest.Short(), len(e.Missing))
	for i, d := range e.Missing {
		if i == 8 {
			fmt.Fprintf(&b, " and %d more", len(e.Missing)-i)
			break
		}
		b.WriteString(" " + d.String())
	}
	b.WriteString(" (push the blobs first)")
	return b.String()
}

// Unwrap makes the error a not_found.
func (e *MissingBlobsError) Unwrap() error { return errs.NotFound }

// NoRef is the not_found of a ref a remote lacks.
func NoRef(where, name string) error {
	return errs.New(errs.NotFound, "remote", "%s has no ref %q", where, name)
}

// NoTag is the not_found of a tag a remote lacks.
func NoTag(where, name, tag string) error {
	return errs.New(errs.NotFound, "remote", "%s has no tag %s:%s", where, name, tag)
}

// NoBlob is the not_found of a blob a remote lacks.
func NoBlob(where string, d objects.Digest) error {
	return errs.New(errs.NotFound, "remote", "%s has no blob %s", where, d)
}

// NoManifest is the not_found of a manifest a remote lacks.
func NoManifest(where string, d objects.Digest) error {
	return errs.New(errs.NotFound, "remote", "%s has no manifest %s", where, d)
}

// RefMoved is the conflict of a compare-and-swap that lost.
func RefMoved(where, name string, from, now objects.Digest) error {
	show := func(d objects.Digest) string {
		if d.IsZero() {
			return "nothing"
		}
		return d.Short()
	}
	return errs.New(errs.Conflict, "remote", "ref %q on %s points at %s, not %s as expected: someone moved it meanwhile; pull it, then push again", name, where, show(now), show(from))
}

// Range cuts [off, off+n) out of data (n < 0: to the end), refusing a
// range outside it.
func Range(data []byte, d objects.Digest, off, n int64) ([]byte, error) {
	size := int64(len(data))
	if n < 0 {
		n = size - off
	}
	if off < 0 || n < 0 || off > size || n > size-off {
		return nil, errs.New(errs.SchemaError, "remote", "range %d+%d outside blob %s of %d bytes", off, n, d.Short(), size)
	}
	return data[off : off+n], nil
}

// VerifyBlobs checks a batch's bounds and each blob against its digest:
// what a receiver does before it stores anything.
func VerifyBlobs(blobs []Blob) error {
	var total int64
	for _, b := range blobs {
		total += int64(len(b.Data))
	}
	if err := CheckBatch(len(blobs), total); err != nil {
		return err
	}
	datas, want := make([][]byte, len(blobs)), make([]objects.Digest, len(blobs))
	for i, b := range blobs {
		datas[i], want[i] = b.Data, b.Digest
	}
	if i, got := objects.FirstMismatch(datas, want); i >= 0 {
		return errs.New(errs.IntegrityError, "remote", "uploaded blob %s: content hashes to %s", want[i].Short(), got.Short())
	}
	return nil
}

// CheckBatch refuses a batch over the limits.
func CheckBatch(n int, bytes int64) error {
	if n > MaxBatchBlobs || bytes > MaxBatchBytes {
		return errs.New(errs.SizeLimitExceeded, "remote", "batch of %d blobs, %d bytes (at most %d blobs, %d bytes)", n, bytes, MaxBatchBlobs, MaxBatchBytes)
	}
	return nil
}

// BlobSizes returns the size of every blob the manifest needs: tensor and
// frame runs are cut into chunks at fixed offsets, so the sizes follow from
// the manifest alone.
func BlobSizes(m *objects.Manifest) map[objects.Digest]int64 {
	out := map[objects.Digest]int64{}
	add := func(size int64, chunks []objects.Digest) {
		for i, d := range chunks {
			_, n := objects.ChunkBounds(size, i)
			out[d] = n
		}
	}
	for _, t := range m.Tensors {
		add(t.Size, t.Chunks)
	}
	for _, f := range m.Files {
		for _, e := range f.Extents {
			if e.Data != nil {
				add(e.Size, e.Data.Chunks)
			}
		}
	}
	return out
}

// CheckManifest checks that encoded hashes to d and decodes it: what a
// receiver does before it stores a manifest.
func CheckManifest(d objects.Digest, encoded []byte) (*objects.Manifest, error) {
	if len(encoded) > MaxManifestBytes {
		return nil, errs.New(errs.SizeLimitExceeded, "remote", "manifest of %d bytes (at most %d)", len(encoded), MaxManifestBytes)
	}
	if err := objects.Verify(encoded, d, "manifest "+d.Short()); err != nil {
		return nil, err
	}
	return objects.DecodeManifest(encoded)
}

package remote

import (
	"context"

	"github.com/mstore/mstore/internal/objects"
)

// Codings a store may keep a blob in besides raw: byte-grouped and
// entropy coded, or the XOR of the blob with a base blob.
const (
	CodingRaw     = "raw"
	CodingGrouped = "grouped"
	CodingDelta   = "delta"
)

// CodedBlob is a blob as a store keeps it: its stored bytes in Coding,
// with what they decode with. Size is the raw size; Base, for a delta, the
// base blob's digest. A raw one's Data is the blob itself.
type CodedBlob struct {
	Digest objects.Digest
	Size   int64
	Coding string
	Base   objects.Digest
	Data   []byte
}

// Coder is what a remote may offer beside Remote: blobs moved as their
// stores keep them, so that a byte-grouped or delta blob crosses the
// network in its smaller coded form. Both ends must know the coding; the
// receiver decodes every coded blob and checks its raw digest before it
// stores it. A remote without it, or whose Codings is empty, moves raw
// bytes through Remote as always.
type Coder interface {
	// Codings lists the codings the remote can send and take.
	Codings() []string
	// GetCoded returns whole blobs as stored (at most MaxBatchBlobs, raw
	// sizes under MaxBatchBytes), in the order asked: each in one of
	// accept if it is kept so, else raw. One the remote lacks is
	// not_found. The bytes are not trusted: the caller decodes and checks.
	GetCoded(ctx context.Context, ds []objects.Digest, accept []string) ([]CodedBlob, error)
	// PutCoded stores each blob the remote lacks, after decoding it and
	// checking its raw digest (a mismatch is an integrity_error and
	// stores nothing). Blobs it cannot take coded (a delta whose base it
	// lacks) come back in raw, for the caller to send with PutBlobs.
	PutCoded(ctx context.Context, blobs []CodedBlob) (raw []objects.Digest, err error)
}

// CoderInto is what a Coder may offer for one blob: GetCoded of d, its
// bytes read into buf when they fit in cap(buf) (Data is then buf[:n]),
// so that a pull can carry every blob in the same few buffers rather than
// fault in and zero a fresh one per blob.
type CoderInto interface {
	GetCodedInto(ctx context.Context, d objects.Digest, accept []string, buf []byte) (CodedBlob, error)
}

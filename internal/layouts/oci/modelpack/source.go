package modelpack

import (
	"context"
	"slices"

	"github.com/opencontainers/go-digest"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
)

// ReadRange reads n bytes from off of the blob named by layer (a file
// layer). The bytes are not trusted: transfer checks every blob against
// its BLAKE3 before it writes it.
type ReadRange func(ctx context.Context, layer digest.Digest, off, n int64) ([]byte, error)

// Source is one mstore version inside a ModelPack artifact that carries
// mstore's map layer, seen as a read-only remote.Remote: its blobs are
// read out of the file layers where Locate finds them, so transfer.Pull
// takes it in as from any remote (only the blobs a store lacks move, each
// verified, the version committed last).
type Source struct {
	Where   string // for messages
	Name    string // the one ref: the version
	TagName string // and its one tag, if any
	Digest  objects.Digest
	Encoded []byte
	spans   map[objects.Digest]Span
	layers  map[string]digest.Digest // file path → its layer
	read    ReadRange
}

// NewSource returns the Source of a version whose map layer decoded to mp
// (with DecodeMap), reading layer bytes with read.
func NewSource(where, name, tag string, mp *Map, m *objects.Manifest, read ReadRange) *Source {
	s := &Source{Where: where, Name: name, TagName: tag, Digest: mp.Digest, Encoded: mp.Manifest, spans: Locate(m), layers: map[string]digest.Digest{}, read: read}
	for _, f := range mp.Files {
		s.layers[f.Path] = f.SHA256
	}
	return s
}

var _ remote.Remote = (*Source)(nil)

// HasBlobs reports the blobs some file holds.
func (s *Source) HasBlobs(_ context.Context, ds []objects.Digest) ([]bool, error) {
	out := make([]bool, len(ds))
	for i, d := range ds {
		_, out[i] = s.spans[d]
	}
	return out, nil
}

// GetBlob reads a range of one blob.
func (s *Source) GetBlob(ctx context.Context, d objects.Digest, off, n int64) ([]byte, error) {
	sp, ok := s.spans[d]
	if !ok {
		return nil, remote.NoBlob(s.Where, d)
	}
	if n < 0 {
		n = sp.Size - off
	}
	if off < 0 || n < 0 || off > sp.Size || n > sp.Size-off {
		return nil, errs.New(errs.SchemaError, pkg, "range %d+%d outside blob %s of %d bytes", off, n, d.Short(), sp.Size)
	}
	return s.read(ctx, s.layers[sp.Path], sp.Off+off, n)
}

// BlobSize is the size of blob d, if some file holds it.
func (s *Source) BlobSize(d objects.Digest) (int64, bool) {
	sp, ok := s.spans[d]
	return sp.Size, ok
}

// mergeGap is how far apart two blobs of one file may lie and still be
// read in one request (the gap's bytes are read and dropped).
const mergeGap = 64 << 10

// GetBlobs reads whole blobs, those that lie close together in one file
// with one read.
func (s *Source) GetBlobs(ctx context.Context, ds []objects.Digest) ([][]byte, error) {
	order := make([]int, len(ds))
	var total int64
	for i, d := range ds {
		sp, ok := s.spans[d]
		if !ok {
			return nil, remote.NoBlob(s.Where, d)
		}
		order[i], total = i, total+sp.Size
	}
	if err := remote.CheckBatch(len(ds), total); err != nil {
		return nil, err
	}
	slices.SortFunc(order, func(a, b int) int {
		x, y := s.spans[ds[a]], s.spans[ds[b]]
		if x.Path != y.Path {
			if x.Path < y.Path {
				return -1
			}
			return 1
		}
		return int(x.Off - y.Off)
	})
	out := make([][]byte, len(ds))
	for i := 0; i < len(order); {
		first := s.spans[ds[order[i]]]
		end := first.Off + first.Size
		j := i + 1
		for ; j < len(order); j++ {
			sp := s.spans[ds[order[j]]]
			if sp.Path != first.Path || sp.Off > end+mergeGap || max(end, sp.Off+sp.Size)-first.Off > remote.MaxBatchBytes {
				break
			}
			end = max(end, sp.Off+sp.Size)
		}
		b, err := s.read(ctx, s.layers[first.Path], first.Off, end-first.Off)
		if err != nil {
			return nil, err
		}
		if int64(len(b)) != end-first.Off {
			return nil, errs.New(errs.IntegrityError, pkg, "%s: a read of %d bytes gave %d", s.Where, end-first.Off, len(b))
		}
		for _, k := range order[i:j] {
			sp := s.spans[ds[k]]
			out[k] = b[sp.Off-first.Off : sp.Off-first.Off+sp.Size]
		}
		i = j
	}
	return out, nil
}

// GetManifest returns the version's encoded mstore manifest.
func (s *Source) GetManifest(_ context.Context, d objects.Digest) ([]byte, error) {
	if d != s.Digest {
		return nil, remote.NoManifest(s.Where, d)
	}
	return s.Encoded, nil
}

// Ref: the one ref, Name, names the version.
func (s *Source) Ref(_ context.Context, name string) (remote.RefInfo, error) {
	if name != s.Name {
		return remote.RefInfo{}, remote.NoRef(s.Where, name)
	}
	return remote.RefInfo{Name: name, Current: s.Digest, History: []objects.Digest{s.Digest}}, nil
}

// Tag: the one tag, if any.
func (s *Source) Tag(_ context.Context, name, tag string) (objects.Digest, error) {
	if name != s.Name || tag != s.TagName || tag == "" {
		return objects.Digest{}, remote.NoTag(s.Where, name, tag)
	}
	return s.Digest, nil
}

func (s *Source) readOnly() error {
	return errs.New(errs.UnsupportedVersion, pkg, "%s is read here as one ModelPack artifact; it takes no writes", s.Where)
}

// PutBlobs is refused: a Source is read-only.
func (s *Source) PutBlobs(context.Context, []remote.Blob) error { return s.readOnly() }

// PutManifest is refused: a Source is read-only.
func (s *Source) PutManifest(context.Context, objects.Digest, []byte) (bool, error) {
	return false, s.readOnly()
}

// MoveRef is refused: a Source is read-only.
func (s *Source) MoveRef(context.Context, string, objects.Digest, objects.Digest, string) error {
	return s.readOnly()
}

// CreateTag is refused: a Source is read-only.
func (s *Source) CreateTag(context.Context, string, string, objects.Digest) (bool, error) {
	return false, s.readOnly()
}

// Close does nothing.
func (s *Source) Close() error { return nil }

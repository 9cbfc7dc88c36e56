package restorer

import (
	"fmt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
)

// storedFrames gives planners the frame bytes of m's files (PlanRequest.Frames).
func storedFrames(st *store.Store, m *objects.Manifest) func(path string, limit int64) ([][]byte, error) {
	return func(p string, limit int64) ([][]byte, error) {
		f := m.File(p)
		if f == nil {
			return nil, errs.New(errs.NotFound, "checkout", "%s is not part of this version", p)
		}
		var total int64
		var pieces []piece
		for _, e := range f.Extents {
			if e.Kind == objects.ExtentFrame || e.Kind == objects.ExtentZeros {
				total += e.Size
			}
			if e.Kind == objects.ExtentFrame {
				pieces = append(pieces, chunkPieces(e.Size, e.Data.Chunks)...)
			}
		}
		if total > limit {
			return nil, errs.New(errs.SizeLimitExceeded, "checkout", "%s has %d bytes of frames, more than %d", p, total, limit)
		}
		blobs, err := openBlobs(st, &plan{files: []planFile{{pieces: pieces}}})
		if err != nil {
			return nil, err
		}
		defer blobs.Close()
		out := make([][]byte, len(f.Extents))
		next := 0 // the first of pieces not yet read
		for i, e := range f.Extents {
			switch e.Kind {
			case objects.ExtentZeros:
				out[i] = make([]byte, e.Size)
			case objects.ExtentFrame:
				buf := make([]byte, 0, e.Size)
				frame := pieces[next : next+len(e.Data.Chunks)]
				next += len(frame)
				for _, pc := range frame {
					b, err := blobs.readOne(pc, nil)
					if err != nil {
						return nil, err
					}
					buf = append(buf, b...)
				}
				if err := objects.Verify(buf, e.Data.Digest, fmt.Sprintf("%s: frame %d", p, i)); err != nil {
					return nil, err
				}
				out[i] = buf
			}
		}
		return out, nil
	}
}

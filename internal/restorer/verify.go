package restorer

import (
	"context"
	"fmt"
	"io"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/mstore/mstore/internal/codecs"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/modeldir"
	"github.com/mstore/mstore/internal/objects"
)

// verifyRelayout parses the written container files again with their codec
// and checks that they are the planned layout: same files, same extents at
// the same offsets, same dtypes and shapes, and tensor bytes that hash to
// the digests in the manifest.
func verifyRelayout(ctx context.Context, p *plan, root string) error {
	codec, ok := codecs.ByName(p.layout.Format)
	if !ok {
		return errs.New(errs.UnsupportedVersion, "checkout", "no codec reads %s back", p.layout.Format)
	}
	dir, err := modeldir.Open(root)
	if err != nil {
		return err
	}
	defer dir.Close()
	got, err := codec.Parse(dir, dir.SortedFiles(codec.Claims))
	if err != nil {
		return errs.Wrap(errs.IntegrityError, "checkout", err, "the written %s files do not parse", p.format)
	}
	bad := func(format string, args ...any) error {
		return errs.New(errs.IntegrityError, "checkout", "written files differ from the plan: "+format, args...)
	}
	want := p.layout
	if len(got.Files) != len(want.Files) || len(got.Tensors) != len(want.Tensors) {
		return bad("%d files and %d tensors, planned %d and %d", len(got.Files), len(got.Tensors), len(want.Files), len(want.Tensors))
	}
	for i, gf := range got.Files {
		wf := want.Files[i]
		if gf.Path != wf.Path || gf.Size != wf.Size || len(gf.Extents) != len(wf.Extents) {
			return bad("%s (%d bytes), planned %s (%d bytes)", gf.Path, gf.Size, wf.Path, wf.Size)
		}
		for j, ge := range gf.Extents {
			we := wf.Extents[j]
			if ge.Kind != we.Kind || ge.Offset != we.Offset || ge.Size != we.Size ||
				ge.Kind == formats.TensorData && got.Tensors[ge.Tensor].Name != want.Tensors[we.Tensor].Name {
				return bad("%s: extent %d at byte %d differs", gf.Path, j, ge.Offset)
			}
		}
	}
	for i, gt := range got.Tensors {
		wt := want.Tensors[i]
		if gt.Name != wt.Name || gt.DType != wt.DType || gt.Size != wt.Size || !slices.Equal(gt.Shape, wt.Shape) {
			return bad("tensor %q is %s%v, planned %q %s%v", gt.Name, gt.DType, gt.Shape, wt.Name, wt.DType, wt.Shape)
		}
	}
	return hashTensors(ctx, dir, got, p.tensors)
}

// hashTensors re-reads every tensor from the written files and compares its
// digest with the manifest's. Each file is opened once; its small tensors
// are read a block at a time (a file of 100,000 tensors is not 100,000
// opens and reads), its large ones in parallel.
func hashTensors(ctx context.Context, dir *modeldir.Dir, l *formats.Layout, want []objects.Tensor) error {
	for _, f := range l.Files {
		if err := hashFileTensors(ctx, dir, f, want); err != nil {
			return err
		}
	}
	return nil
}

// hashBlock is the read size of hashFileTensors' small tensors.
const hashBlock = 1 << 20

func hashFileTensors(ctx context.Context, dir *modeldir.Dir, f formats.File, want []objects.Tensor) error {
	tensors, small := 0, 0
	for _, e := range f.Extents {
		if e.Kind == formats.TensorData {
			tensors++
			if e.Size < hashBlock {
				small++
			}
		}
	}
	if tensors == 0 {
		return nil
	}
	r, err := dir.Open(f.Path)
	if err != nil {
		return err
	}
	defer r.Close()
	check := func(e formats.Extent, got objects.Digest) error {
		if w := want[e.Tensor]; got != w.Digest {
			return errs.New(errs.IntegrityError, "checkout", "%s: tensor %q hashes to %s, the manifest says %s",
				f.Path, w.Name, got.Short(), w.Digest.Short())
		}
		return nil
	}
	g, ctx := errgroup.WithContext(ctx) // the first mismatch stops the others
	g.SetLimit(3)
	for _, e := range f.Extents {
		if e.Kind != formats.TensorData || e.Size < hashBlock {
			continue
		}
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			hs := objects.NewHasher()
			if _, err := io.Copy(hs, ctxReader{ctx, io.NewSectionReader(r, e.Offset, e.Size)}); err != nil {
				return err
			}
			return check(e, hs.Digest())
		})
	}
	if small > 0 {
		g.Go(func() error {
			buf := make([]byte, hashBlock)
			var at, n int64 // buf holds the file's bytes [at, at+n)
			// The tensors of a block are hashed together, eight at a time
			// (objects.FirstMismatch).
			var msgs [][]byte
			var digests []objects.Digest
			var of []formats.Extent
			checkBlock := func() error {
				if i, got := objects.FirstMismatch(msgs, digests); i >= 0 {
					return check(of[i], got)
				}
				msgs, digests, of = msgs[:0], digests[:0], of[:0]
				return nil
			}
			// The small tensors are walked where they are, not copied out:
			// a copy of the extents of 100,000 of them was 40 MB allocated.
			for _, e := range f.Extents {
				if e.Kind != formats.TensorData || e.Size >= hashBlock {
					continue
				}
				if e.Offset < at || e.Offset+e.Size > at+n {
					if err := checkBlock(); err != nil {
						return err
					}
					if err := ctx.Err(); err != nil {
						return err
					}
					at, n = e.Offset, min(hashBlock, f.Size-e.Offset)
					if k, err := r.ReadAt(buf[:n], at); int64(k) != n {
						return fmt.Errorf("checkout: read back %s: %w", f.Path, err)
					}
				}
				msgs = append(msgs, buf[e.Offset-at:e.Offset-at+e.Size])
				digests = append(digests, want[e.Tensor].Digest)
				of = append(of, e)
			}
			return checkBlock()
		})
	}
	return g.Wait()
}

// ctxReader stops a long read once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

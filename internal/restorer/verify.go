package restorer

import (
	"context"
	"io"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/mstore/mstore/formats"
	"github.com/mstore/mstore/internal/codecs"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/modeldir"
	"github.com/mstore/mstore/objects"
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
// digest with the manifest's.
func hashTensors(ctx context.Context, dir *modeldir.Dir, l *formats.Layout, want []objects.Tensor) error {
	g, ctx := errgroup.WithContext(ctx) // the first mismatch stops the others
	g.SetLimit(3)
	for _, f := range l.Files {
		for _, e := range f.Extents {
			if e.Kind != formats.TensorData {
				continue
			}
			g.Go(func() error {
				if err := ctx.Err(); err != nil {
					return err
				}
				r, err := dir.Open(f.Path)
				if err != nil {
					return err
				}
				defer r.Close()
				hs := objects.NewHasher()
				if _, err := io.Copy(hs, ctxReader{ctx, io.NewSectionReader(r, e.Offset, e.Size)}); err != nil {
					return err
				}
				if got := hs.Digest(); got != want[e.Tensor].Digest {
					return errs.New(errs.IntegrityError, "checkout", "%s: tensor %q hashes to %s, the manifest says %s",
						f.Path, want[e.Tensor].Name, got.Short(), want[e.Tensor].Digest.Short())
				}
				return nil
			})
		}
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

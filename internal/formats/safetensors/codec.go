package safetensors

import (
	"math"

	"golang.org/x/sync/errgroup"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/hfindex"
)

// Codec is the SafeTensors codec.
var Codec formats.Codec = codec{}

type codec struct{ limits formats.Limits }

// WithLimits returns the codec with the user's cap on the parse budget.
func (codec) WithLimits(l formats.Limits) formats.Codec { return codec{limits: l} }

// Name is the format's key in manifests.
func (codec) Name() string { return "safetensors" }

// Claims reports whether p is a SafeTensors file or a shard index.
func (codec) Claims(p string) bool { return isContainerName(p) || isIndexName(p) }

// Parse reads the headers of the .safetensors files among paths and the
// shard indexes, checks them against each other and returns the layout:
// files in path order; each .safetensors file as its frame (length prefix
// and header, padding included) then its tensors in data-offset order; each
// index as one frame. Tensor data is never read.
func (c codec) Parse(dir formats.Dir, paths []string) (*formats.Layout, error) {
	m, err := hfindex.SortPaths(paths, hfKind)
	if err != nil {
		return nil, err
	}
	containers, indexes := m.Containers, m.Indexes

	// The indexes are read while the headers are: the index of a MoE of
	// 19,502 tensors took 9-12 ms, as long as its ten headers. (The
	// containers are the listing's, never names an index gives.) An
	// index's refusal is the one reported, as when indexes came first.
	indexErr := make(chan error, 1)
	go func() { indexErr <- m.ReadIndexes(dir, hfKind) }()
	headers, sizes, err := readHeaders(dir, containers, c.limits)
	if ierr := <-indexErr; ierr != nil {
		return nil, ierr
	}
	if err != nil {
		return nil, err
	}

	total := 0
	for _, p := range containers {
		total += len(headers[p].tensors)
	}
	if err := checkNames(m, headers, total); err != nil {
		return nil, err
	}

	l := &formats.Layout{Format: Codec.Name(), Tensors: make([]formats.Tensor, 0, total)}
	for _, p := range paths {
		if idx := indexes[p]; idx != nil {
			l.Files = append(l.Files, formats.File{
				Path: p, Size: idx.Size, Index: true,
				Extents: []formats.Extent{{Kind: formats.Frame, Size: idx.Size}},
			})
			continue
		}
		h := headers[p]
		f := formats.File{Path: p, Size: sizes[p], Meta: h.meta}
		f.Extents = append(make([]formats.Extent, 0, 1+len(h.tensors)),
			formats.Extent{Kind: formats.Frame, Size: h.frameSize})
		for _, e := range h.tensors {
			f.Extents = append(f.Extents, formats.Extent{
				Kind: formats.TensorData, Offset: h.frameSize + e.begin, Size: e.end - e.begin, Tensor: len(l.Tensors),
			})
			l.Tensors = append(l.Tensors, formats.Tensor{Name: e.name, DType: e.dtype, Shape: e.shape, Size: e.end - e.begin})
		}
		l.Files = append(l.Files, f)
	}
	return l, nil
}

// headerWorkers is how many shards' headers are read and parsed at once.
// Each parse has its own budget (formats.Limits), so this bounds what the
// parses build at once too.
const headerWorkers = 2

// readHeaders reads the header of each container, headerWorkers at a time
// (the ten shards of a MoE of 19,500 tensors took 22 ms one by one). The
// error is that of the first container, in order, that fails, as one at a
// time would report it.
func readHeaders(dir formats.Dir, paths []string, lim formats.Limits) (map[string]*header, map[string]int64, error) {
	hs := make([]*header, len(paths))
	sizes := make([]int64, len(paths))
	failed := make([]error, len(paths))
	var g errgroup.Group
	g.SetLimit(headerWorkers)
	for i, p := range paths {
		g.Go(func() error {
			hs[i], sizes[i], failed[i] = readHeader(dir, p, lim)
			return nil
		})
	}
	g.Wait()
	headers := make(map[string]*header, len(paths))
	bySize := make(map[string]int64, len(paths))
	for i, p := range paths {
		if failed[i] != nil {
			return nil, nil, failed[i]
		}
		headers[p], bySize[p] = hs[i], sizes[i]
	}
	return headers, bySize, nil
}

// checkNames requires tensor names unique across the model's files before
// an index is checked, so that a tensor's file is well defined, and checks
// each index against the headers. One file without an index needs no map
// of its (up to 100,000) names: its header has checked them.
func checkNames(m *hfindex.Model, headers map[string]*header, total int) error {
	if len(m.Containers) == 1 && len(m.IndexPaths) == 0 {
		return nil
	}
	fileOf := make(map[string]string, total)
	for _, p := range m.Containers {
		for _, e := range headers[p].tensors {
			if other, dup := fileOf[e.name]; dup {
				return errs.At(errs.SchemaError, pkg, p, e.at, "tensor %q is also in %s", e.name, other)
			}
			fileOf[e.name] = p
		}
	}
	for _, p := range m.IndexPaths {
		if err := checkIndex(m.Indexes[p], headers, fileOf); err != nil {
			return err
		}
	}
	return nil
}

// checkIndex checks an index against the headers of its shards: the
// weight_map must place exactly the tensors of each shard, in that shard,
// and total_size must be the sum of their sizes. fileOf holds each
// tensor once (checkNames), so a shard's tensors are all named when the
// weight_map places as many in it (hfindex.Placed).
func checkIndex(idx *hfindex.Index, headers map[string]*header, fileOf map[string]string) error {
	placed, err := idx.Placed(fileOf)
	if err != nil {
		return err
	}
	var total int64
	for _, s := range idx.Shards {
		tensors := headers[s].tensors
		if placed[s] != len(tensors) {
			return unnamed(idx, s, tensors, placed[s])
		}
		for _, e := range tensors {
			if total > math.MaxInt64-(e.end-e.begin) {
				return errs.At(errs.SchemaError, pkg, idx.Path, -1, "the shards' sizes overflow")
			}
			total += e.end - e.begin
		}
	}
	if idx.TotalSize >= 0 && idx.TotalSize != total {
		return errs.At(errs.SchemaError, pkg, idx.Path, idx.TotalAt, "metadata.total_size is %d, the shards' tensors hold %d bytes", idx.TotalSize, total)
	}
	return nil
}

// unnamed is the refusal of shard s, some of whose tensors the weight_map
// does not name (it places n of them in s): the first of them.
func unnamed(idx *hfindex.Index, s string, tensors []entry, n int) error {
	named := idx.Named()
	for _, e := range tensors {
		if !named[e.name] {
			return errs.At(errs.SchemaError, pkg, idx.Path, -1, "tensor %q of shard %s is missing from the weight_map", e.name, s)
		}
	}
	// Not reached: Placed counted each named tensor of s once.
	return errs.At(errs.SchemaError, pkg, idx.Path, -1, "weight_map places %d tensors in shard %s, which holds %d", n, s, len(tensors))
}

package pytorch

import (
	"path"
	"regexp"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/hfindex"
)

const pkg = "pytorch"

// Codec is the PyTorch checkpoint codec.
var Codec formats.Codec = codec{lim: DefaultLimits}

type codec struct{ lim Limits }

// CodecWith returns the codec with other bounds (tests, fuzzing).
func CodecWith(lim Limits) formats.Codec { return codec{lim: lim} }

// WithLimits returns the codec with the user's cap on the parse budget.
func (c codec) WithLimits(l formats.Limits) formats.Codec {
	c.lim.MaxParseMemory = l.MaxParseMemory
	return c
}

// Name is the format's key in manifests.
func (codec) Name() string { return "pytorch" }

// auxiliary matches the files that Hugging Face's Trainer writes beside a
// model (its arguments, optimizer, scheduler and random states): pickles
// that are not weights. They are not claimed, so they stay the model's
// other files, kept byte for byte and never interpreted.
var auxiliary = regexp.MustCompile(`^(training_args\.bin|optimizer\.(pt|bin)|scheduler\.(pt|bin)|scaler\.pt|rng_state(_[0-9]+)?\.pth)$`)

// Claims reports whether p is a checkpoint (.bin, .pt, .pth) or a shard
// index (PREFIX.bin.index.json).
func (codec) Claims(p string) bool {
	base := path.Base(p)
	if strings.HasSuffix(base, indexSuffix) {
		return true
	}
	switch strings.ToLower(path.Ext(base)) {
	case ".bin", ".pt", ".pth":
		return !auxiliary.MatchString(base)
	}
	return false
}

// Parse reads every checkpoint and shard index among paths, checks them
// against each other and returns the layout: files in path order; each
// checkpoint's storages as tensor extents and the rest of its zip
// (headers, data.pkl, small records, central directory) as frames; each
// index as one frame. Layout tensors are numbered file by file.
func (c codec) Parse(dir formats.Dir, paths []string) (*formats.Layout, error) {
	m, err := hfindex.ReadModel(dir, paths, hfindex.Kind{
		Pkg: pkg, IndexSuffix: indexSuffix, IsContainer: c.Claims, Names: shardNames,
		What: "a PyTorch checkpoint or shard index", Containers: "checkpoint files",
	})
	if err != nil {
		return nil, err
	}
	containers, indexes := m.Containers, m.Indexes

	files := map[string]*checkpoint{}
	for _, p := range containers {
		ck, err := readCheckpoint(dir, p, c.lim)
		if err != nil {
			return nil, err
		}
		files[p] = ck
	}

	// Every name, of a state-dict tensor or of a Layout tensor, is unique
	// across the model.
	names := 0
	for _, ck := range files {
		names += len(ck.named) + len(ck.meta.Storages)
	}
	fileOf := make(map[string]string, names)
	for _, p := range containers {
		ck := files[p]
		for _, n := range ck.named {
			if other, dup := fileOf[n.name]; dup {
				return nil, errs.At(errs.SchemaError, pkg, p, -1, "tensor %q is also in %s (names are joined with \".\" and must be unique)", n.name, other)
			}
			fileOf[n.name] = p
		}
		for _, name := range ck.meta.Storages {
			if other, dup := fileOf[name]; dup {
				return nil, errs.At(errs.SchemaError, pkg, p, -1, "name %q is also used in %s", name, other)
			}
			fileOf[name] = p
		}
	}
	for _, p := range m.IndexPaths {
		if err := checkIndex(indexes[p], files, fileOf); err != nil {
			return nil, err
		}
	}

	l := &formats.Layout{Format: Codec.Name()}
	for _, p := range paths {
		if idx := indexes[p]; idx != nil {
			l.Files = append(l.Files, formats.File{Path: p, Size: idx.Size, Index: true,
				Extents: []formats.Extent{{Kind: formats.Frame, Size: idx.Size}}})
			continue
		}
		ck := files[p]
		l.Files = append(l.Files, ck.file(len(l.Tensors)))
		l.Tensors = append(l.Tensors, ck.tensors...)
	}
	return l, nil
}

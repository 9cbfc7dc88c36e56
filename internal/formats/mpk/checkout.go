package mpk

import (
	"io"
	"sort"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
)

// An MPK archive is stored as its tar stream. Checked out as added, that
// stream is written byte for byte through the canonical gzip writer
// (Encoding); with --extract, PlanCheckout lays its members out as the
// archive's validated tree instead.

// Honours: an archive is checked out whole, or extracted.
func (codec) Honours() []formats.Option { return []formats.Option{formats.OptExtract} }

// Extensions are stripped from an added file's name for its ref name.
func (codec) Extensions() []string { return []string{".tar.gz"} }

// Encoding returns the canonical writer of a stored archive's encoding.
func (codec) Encoding(name string) (func(io.Writer) io.WriteCloser, bool) {
	if name != Compression {
		return nil, false
	}
	return NewCanonicalWriter, true
}

// Export refuses every conversion: an archive holds no tensors.
func (codec) Export(formats.PlanRequest, string, bool) (*formats.Export, error) {
	return nil, errs.New(errs.UnsupportedVersion, "checkout",
		"an MPK archive holds model binaries and JSON, not tensors: check it out as the archive, or with --extract")
}

// PlanCheckout writes an MPK archive's members as its extracted tree: each at
// its target (etc/, lib/, share/ + base name), one whole stored member per
// file, checked against the member's digest as it is written. An archive is
// checked out whole: the only new layout it has is --extract.
func (codec) PlanCheckout(req formats.PlanRequest) (*formats.Planned, error) {
	o := req.Options
	if req.Source.Format != Codec.Name() {
		if o.Extract {
			return nil, errs.New(errs.UnsupportedVersion, "checkout", "--extract writes the tree of an MPK archive; this version is %s", req.Source.Format)
		}
		return nil, errs.New(errs.UnsupportedVersion, "checkout", "this build writes MPK archives only from MPK archives; this version is %s", req.Source.Format)
	}
	if !o.Extract || len(req.Tensors) != len(req.Source.Tensors) {
		return nil, errs.New(errs.SchemaError, "checkout",
			"an MPK archive is checked out whole, as the archive or with --extract; layout and tensor options do not apply to it")
	}
	l := &formats.Layout{Format: Codec.Name()}
	seen := map[string]bool{}
	for i, t := range req.Tensors {
		target, err := Target(t.Name) // checked again: the tree's paths come from the manifest
		if err != nil {
			return nil, err
		}
		if seen[target] {
			return nil, errs.New(errs.IntegrityError, "checkout", "two members of this version extract to %s", target)
		}
		seen[target] = true
		l.Tensors = append(l.Tensors, formats.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Size: t.Size})
		l.Files = append(l.Files, formats.File{Path: target, Size: t.Size,
			Extents: []formats.Extent{{Kind: formats.TensorData, Size: t.Size, Tensor: i}}})
	}
	sort.Slice(l.Files, func(i, j int) bool { return l.Files[i].Path < l.Files[j].Path })
	return &formats.Planned{Layout: l, Tree: true, Used: o.Uses(formats.OptExtract)}, nil
}

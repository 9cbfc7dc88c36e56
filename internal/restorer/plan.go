package restorer

import (
	"github.com/mstore/mstore/formats"
	"github.com/mstore/mstore/formats/safetensors"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/objects"
)

// piece is a run of an output file: a blob, literal bytes or zeros.
type piece struct {
	blob    objects.Digest
	size    int64
	literal []byte // planned frame bytes
	zeros   bool
}

// planFile is one output file.
type planFile struct {
	path   string
	size   int64
	want   *objects.Digest // the file's digest when it is known in advance
	pieces []piece
}

// plan is everything a checkout writes.
type plan struct {
	format   string
	relayout bool
	files    []planFile
	tensors  []objects.Tensor // the tensors written, in output order
	// layout is the planned container layout of a re-layout, which the
	// written files must parse back to.
	layout *formats.Layout
}

func (p *plan) bytes() int64 {
	var n int64
	for _, f := range p.files {
		n += f.size
	}
	return n
}

// makePlan decides what to write: the files as added, or a new layout.
func makePlan(m *objects.Manifest, opts Options) (*plan, error) {
	target := opts.Format
	if target == "" {
		target = m.Format
	}
	if target != m.Format {
		return nil, errs.New(errs.UnsupportedVersion, "checkout", "converting %s to %s is not supported by this build", m.Format, target)
	}
	if err := ValidPatterns(opts.Tensors); err != nil {
		return nil, err
	}
	p := &plan{format: target, relayout: opts.MaxShardSize > 0 || len(opts.Tensors) > 0}
	if !p.relayout {
		p.tensors = m.Tensors
		for _, f := range m.Files {
			p.files = append(p.files, storedFile(m, f))
		}
		return p, nil
	}

	var selected []objects.Tensor
	for _, t := range m.Tensors {
		if len(opts.Tensors) == 0 || MatchAny(opts.Tensors, t.Name) {
			selected = append(selected, t)
		}
	}
	if len(selected) == 0 {
		return nil, errs.New(errs.NotFound, "checkout", "no tensor matches %q (see `mstore show`)", opts.Tensors)
	}
	var meta map[string]string
	for _, f := range m.Files {
		if f.Role == objects.RoleContainer {
			meta = f.Meta
			break
		}
	}
	in := make([]formats.Tensor, len(selected))
	for i, t := range selected {
		in[i] = formats.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Size: t.Size}
	}
	layout, err := safetensors.Plan(in, safetensors.PlanOptions{MaxShardSize: opts.MaxShardSize, Metadata: meta})
	if err != nil {
		return nil, err
	}
	p.layout, p.tensors = layout, selected
	for _, f := range layout.Files {
		pf := planFile{path: f.Path, size: f.Size}
		for _, e := range f.Extents {
			switch e.Kind {
			case formats.Frame:
				pf.pieces = append(pf.pieces, piece{literal: e.Bytes, size: e.Size})
			case formats.Zeros:
				pf.pieces = append(pf.pieces, piece{zeros: true, size: e.Size})
			case formats.TensorData:
				pf.pieces = append(pf.pieces, chunkPieces(selected[e.Tensor].Size, selected[e.Tensor].Chunks)...)
			}
		}
		p.files = append(p.files, pf)
	}
	for _, f := range m.Files {
		if f.Role == objects.RoleOther {
			p.files = append(p.files, storedFile(m, f))
		}
	}
	return p, nil
}

// storedFile is a file of the manifest written back exactly.
func storedFile(m *objects.Manifest, f objects.File) planFile {
	want := f.Digest
	pf := planFile{path: f.Path, size: f.Size, want: &want}
	for _, e := range f.Extents {
		switch e.Kind {
		case objects.ExtentFrame:
			pf.pieces = append(pf.pieces, chunkPieces(e.Size, e.Data.Chunks)...)
		case objects.ExtentTensor:
			t := m.Tensors[e.Tensor]
			pf.pieces = append(pf.pieces, chunkPieces(t.Size, t.Chunks)...)
		case objects.ExtentZeros:
			pf.pieces = append(pf.pieces, piece{zeros: true, size: e.Size})
		}
	}
	return pf
}

func chunkPieces(size int64, chunks []objects.Digest) []piece {
	out := make([]piece, len(chunks))
	for i, d := range chunks {
		_, n := objects.ChunkBounds(size, i)
		out[i] = piece{blob: d, size: n}
	}
	return out
}

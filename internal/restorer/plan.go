package restorer

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/mstore/mstore/formats"
	"github.com/mstore/mstore/formats/gguf"
	"github.com/mstore/mstore/formats/safetensors"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/objects"
)

// piece is a run of an output file: a blob, literal bytes, zeros, or a
// tensor computed from a stored one.
type piece struct {
	blob    objects.Digest
	size    int64
	literal []byte // planned frame bytes
	zeros   bool
	derived *derived
	// tensor is 1 + the planned tensor these bytes are part of, and crcs
	// the CRC-32 slots of a frame (formats.Extent.CRC32s), which the writer
	// fills from the CRC-32 of the tensors written before it.
	tensor int
	crcs   []formats.CRC32Slot
}

// derived is a tensor whose written bytes a Transform makes from a stored
// tensor's. Its digest is known only once it is made; the writer puts it in
// *digest for the verification that follows.
type derived struct {
	source    objects.Tensor
	transform Transform
	digest    *objects.Digest
}

// Transform computes a written tensor's bytes from the stored bytes of its
// source tensor: a dtype cast, a strided view made contiguous. It must be
// deterministic and must refuse (lossy_conversion) what it cannot represent.
type Transform func(src []byte) ([]byte, error)

// planFile is one output file.
type planFile struct {
	path   string
	size   int64
	want   *objects.Digest // the file's digest when it is known in advance
	pieces []piece
	// encoding, when set, is the canonical encoding (encoders) a stored
	// compressed file is written in; pieces and want are its decoded bytes.
	encoding string
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
	// tree: the layout is a plain tree (Planned.Tree), checked file by
	// file as it is written instead.
	tree bool
	note string // Planned.Note
}

func (p *plan) bytes() int64 {
	var n int64
	for _, f := range p.files {
		n += f.size
	}
	return n
}

// A planner lays tensors out as the files of one container format, with no
// I/O: frame extents carry their bytes, tensor extents index the planned
// layout's tensors. Each format's planner lives in its own file and
// registers itself in planners.
type planner func(req PlanRequest) (*Planned, error)

// Planned is a planner's answer.
type Planned struct {
	Layout *formats.Layout
	// Sources[i] is the stored tensor whose bytes fill Layout.Tensors[i]. A
	// nil Sources means Layout.Tensors[i] is req.Tensors[i], byte for byte.
	Sources []objects.Tensor
	// Transforms[i], when non-nil, makes tensor i's bytes from its source's
	// (then Layout.Tensors[i] may have another dtype, shape or size).
	Transforms []Transform
	// Tree says the layout is a plain tree of files that no codec reads
	// back (an extracted MPK archive): each file must be exactly one
	// untransformed tensor, and is checked against that tensor's digest as
	// it is written rather than parsed again.
	Tree bool
	// Extra are whole files written beside the layout's (path → bytes),
	// such as the config.json of a GGUF model converted to HF.
	Extra map[string][]byte
	// Note is a remark for the user (Result.Note).
	Note string
}

// PlanRequest is what a planner gets: the version being checked out, the
// tensors to write (in manifest order) and the user's options.
type PlanRequest struct {
	Source  *objects.Manifest
	Tensors []objects.Tensor
	Options Options
	// Frames returns the bytes of the frame extents of Source's file at
	// path, one entry per extent (zeros for zero extents, nil for tensor
	// extents), each blob verified: for planners that rewrite a
	// container's frame (ONNX's protobuf). More than limit bytes of frames
	// is size_limit_exceeded.
	Frames func(path string, limit int64) ([][]byte, error)
}

var planners = map[string]planner{"safetensors": planSafetensors}

// makePlan decides what to write: the files as added, or a new layout made
// by the target format's planner.
func makePlan(m *objects.Manifest, opts Options, frames func(string, int64) ([][]byte, error)) (*plan, error) {
	target := opts.Format
	if target == "" {
		target = m.Format
	}
	layOut := planners[target]
	if layOut == nil {
		return nil, errs.New(errs.UnsupportedVersion, "checkout", "this build cannot write %s (it writes %s)", target, plannerNames())
	}
	if err := ValidPatterns(opts.Tensors); err != nil {
		return nil, err
	}
	p := &plan{format: target, relayout: target != m.Format || opts.relayout()}
	if !p.relayout {
		p.tensors = m.Tensors
		for _, f := range m.Files {
			p.files = append(p.files, storedFile(m, f))
		}
		return p, nil
	}

	selected, read, err := selectTensors(m, opts)
	if err != nil {
		return nil, err
	}
	if len(selected) == 0 {
		return nil, errs.New(errs.NotFound, "checkout", "no tensor matches %q (see `mstore show`)", opts.Tensors)
	}
	planned, err := layOut(PlanRequest{Source: m, Tensors: selected, Options: opts, Frames: frames})
	if err != nil {
		return nil, err
	}
	if err := p.adopt(planned, selected, read); err != nil {
		return nil, err
	}
	p.files, p.note = append(p.files, extraFiles(planned.Extra)...), planned.Note
	for _, f := range m.Files {
		if f.Role == objects.RoleOther && planned.Extra[f.Path] == nil {
			p.files = append(p.files, storedFile(m, f))
		}
	}
	return p, nil
}

// adopt turns a planner's layout into the files to write, and records the
// tensors (and, for transformed ones, where their digests will be) that the
// written files must hold.
func (p *plan) adopt(planned *Planned, selected []objects.Tensor, read map[string]Expanded) error {
	l := planned.Layout
	if planned.Transforms != nil && len(planned.Transforms) != len(l.Tensors) {
		return fmt.Errorf("checkout: planner for %s returned %d tensors, %d transforms", l.Format, len(l.Tensors), len(planned.Transforms))
	}
	sources, transforms := resolveReads(planned, selected, read)
	if len(sources) != len(l.Tensors) {
		return fmt.Errorf("checkout: planner for %s returned %d tensors, %d sources", l.Format, len(l.Tensors), len(sources))
	}
	p.layout, p.tree = l, planned.Tree
	p.tensors = make([]objects.Tensor, len(l.Tensors))
	for i, t := range l.Tensors {
		src := sources[i]
		p.tensors[i] = objects.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Size: t.Size, Digest: src.Digest, Chunks: src.Chunks}
		if transforms == nil || transforms[i] == nil {
			if t.Size != src.Size {
				return fmt.Errorf("checkout: planned tensor %q is %d bytes, its source %d", t.Name, t.Size, src.Size)
			}
		}
	}
	for _, f := range l.Files {
		pf := planFile{path: f.Path, size: f.Size}
		for _, e := range f.Extents {
			switch e.Kind {
			case formats.Frame:
				pf.pieces = append(pf.pieces, piece{literal: e.Bytes, size: e.Size, crcs: e.CRC32s})
			case formats.Zeros:
				pf.pieces = append(pf.pieces, piece{zeros: true, size: e.Size})
			case formats.TensorData:
				if transforms != nil && transforms[e.Tensor] != nil {
					d := &derived{source: sources[e.Tensor], transform: transforms[e.Tensor], digest: &p.tensors[e.Tensor].Digest}
					pf.pieces = append(pf.pieces, piece{derived: d, size: e.Size, tensor: e.Tensor + 1})
					continue
				}
				src := sources[e.Tensor]
				for _, pc := range chunkPieces(src.Size, src.Chunks) {
					pc.tensor = e.Tensor + 1
					pf.pieces = append(pf.pieces, pc)
				}
			}
		}
		if planned.Tree {
			e := f.Extents
			if len(e) != 1 || e[0].Kind != formats.TensorData || e[0].Size != f.Size || transforms != nil && transforms[e[0].Tensor] != nil {
				return fmt.Errorf("checkout: planner for %s: tree file %s is not one whole stored tensor", l.Format, f.Path)
			}
			want := p.tensors[e[0].Tensor].Digest
			pf.want = &want
		}
		p.files = append(p.files, pf)
	}
	return nil
}

func plannerNames() string {
	var names []string
	for n := range planners {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// planSafetensors writes the tensors as SafeTensors, sharded at
// --max-shard-size, with the source's __metadata__.
func planSafetensors(req PlanRequest) (*Planned, error) {
	var meta map[string]string
	name := ""
	if req.Source.Format == "safetensors" {
		for _, f := range req.Source.Files {
			if f.Role == objects.RoleContainer {
				meta, name = f.Meta, baseName(f.Path)
				break
			}
		}
	} else if from := safetensorsFrom[req.Source.Format]; from != nil {
		var err error
		if name, meta, err = from(req); err != nil {
			return nil, err
		}
	}
	in, tr, err := castTensors(req.Tensors, req.Options) // --dtype
	if err != nil {
		return nil, err
	}
	extra, err := castConfig(req, tr != nil)
	if err != nil {
		return nil, err
	}
	if req.Source.Format == gguf.Codec.Name() {
		if in, tr, extra, err = ggufToHF(req, in, tr); err != nil {
			return nil, err
		} else if extra != nil {
			name = "model"
		}
	}
	l, err := safetensors.Plan(in, safetensors.PlanOptions{MaxShardSize: req.Options.MaxShardSize, Metadata: meta, Name: name})
	if err != nil {
		return nil, err
	}
	return &Planned{Layout: l, Transforms: tr, Extra: extra}, nil
}

// safetensorsFrom lets a source format say what a SafeTensors checkout of
// its versions is named and carries as __metadata__ (GGUF keeps its
// key/values there), or refuse it (quantized tensors, which SafeTensors
// cannot hold). A format registers its own from its planner's file.
var safetensorsFrom = map[string]func(req PlanRequest) (name string, meta map[string]string, err error){}

// shardSuffix matches "-00001-of-00003.safetensors".
var shardSuffix = regexp.MustCompile(`-\d{5}-of-\d{5}\.safetensors$`)

// baseName is the name a re-layout keeps: "adapters.safetensors" and
// "model-00001-of-00002.safetensors" give "adapters" and "model".
func baseName(p string) string {
	if loc := shardSuffix.FindStringIndex(p); loc != nil {
		return p[:loc[0]]
	}
	return strings.TrimSuffix(p, ".safetensors")
}

// storedFile is a file of the manifest written back exactly.
func storedFile(m *objects.Manifest, f objects.File) planFile {
	want := f.Digest
	pf := planFile{path: f.Path, size: f.Size, want: &want, encoding: f.Meta[formats.MetaCompression]}
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

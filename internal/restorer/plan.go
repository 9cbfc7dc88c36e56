package restorer

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/mstore/mstore/internal/codecs"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/cast"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/prefault"
)

// piece is a run of an output file: a blob, a planned frame, zeros, or a
// tensor computed from a stored one. A re-layout of 100,000 small tensors
// to npz is 300,000 pieces: 48 bytes each, where one that held its digest,
// frame bytes and CRC-32 slots itself took 112 (34 MB).
type piece struct {
	size int64
	// Of blob, frame and derived, one is set, or none for zeros.
	blob    *objects.Digest // in its manifest's list of chunks
	frame   *formats.Extent // of the planned layout: its Bytes and CRC32s
	derived *derived
	// rec is 1 + the index of the blob's record in blobSource.recs, set
	// by openBlobs.
	rec int32
	// tensor is 1 + the planned tensor these bytes are part of: the writer
	// fills a frame's CRC-32 slots from the CRC-32 of the tensors written
	// before it.
	tensor int32
	zeros  bool
}

// literal is a frame's bytes, or nil.
func (pc *piece) literal() []byte {
	if pc.frame == nil {
		return nil
	}
	return pc.frame.Bytes
}

// crcs is a frame's CRC-32 slots (formats.Extent.CRC32s).
func (pc *piece) crcs() []formats.CRC32Slot {
	if pc.frame == nil {
		return nil
	}
	return pc.frame.CRC32s
}

// frameOf is a piece of literal bytes.
func frameOf(b []byte) piece {
	return piece{frame: &formats.Extent{Kind: formats.Frame, Size: int64(len(b)), Bytes: b}, size: int64(len(b))}
}

// derived is a tensor whose written bytes a Transform makes from a stored
// tensor's. Its digest is known only once it is made; the writer puts it in
// *digest for the verification that follows.
type derived struct {
	source    objects.Tensor
	transform Transform
	digest    *objects.Digest
	chunks    []piece // source's, pointed at their records by openBlobs
	// part, for a tensor made a chunk at a time (bychunk.go): this piece
	// makes the bytes of source's chunk part.index alone.
	part *castPart
}

// readSize is how many bytes making d reads from the store.
func (d *derived) readSize() int64 {
	if d.part != nil {
		_, n := objects.ChunkBounds(d.source.Size, d.part.index)
		return n
	}
	return d.source.Size
}

// apply applies d's transform to src, its source tensor's bytes, read
// chunk by chunk and each chunk verified, and records the digest of the
// size bytes it makes. A source of one chunk is the chunk's bytes, whose
// digest is the tensor's: it was verified when read.
func (d *derived) apply(src []byte, size int64) ([]byte, error) {
	if d.part != nil {
		return d.part.make(d, src, size)
	}
	if len(d.chunks) != 1 || *d.chunks[0].blob != d.source.Digest {
		if err := objects.Verify(src, d.source.Digest, "tensor "+d.source.Name); err != nil {
			return nil, err
		}
	}
	out, err := d.transform(src)
	if err != nil {
		return nil, err
	}
	if int64(len(out)) != size {
		return nil, fmt.Errorf("checkout: transform of %q made %d bytes, the plan says %d", d.source.Name, len(out), size)
	}
	*d.digest = objects.Sum(out)
	return out, nil
}

// The planning types are the codecs' (formats/checkout.go): each format
// plans its own writes (formats.Planner) and the restorer writes and
// verifies what they plan.
type (
	Transform   = formats.Transform
	Planned     = formats.Planned
	PlanRequest = formats.PlanRequest
	Expanded    = formats.Expanded
)

// planFile is one output file.
type planFile struct {
	path   string
	size   int64
	want   *objects.Digest // the file's digest when it is known in advance
	pieces []piece
	// encoding, when set, is the canonical encoding (encoderFor) a stored
	// compressed file is written in; pieces and want are its decoded bytes.
	encoding string
	// stored: the file is written in its manifest's own layout, blobs and
	// zeros only (copyStored).
	stored bool
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
	// leftOut is what the version holds beside its tensors that the
	// checkout leaves out (--drop-non-tensors; formats.Losses).
	leftOut []string
}

// written drops what only writing the files needed (their pieces, the
// planned frames' bytes), before the written files are parsed back
// (verifyRelayout): for a re-layout of 100,000 small tensors to npz, 60
// MB of a peak of 180 MB live.
func (p *plan) written() {
	p.files = nil
	if p.layout == nil {
		return
	}
	for _, f := range p.layout.Files {
		for i := range f.Extents {
			f.Extents[i].Bytes, f.Extents[i].CRC32s = nil, nil
		}
	}
}

// encoded reports whether a file is written through an encoder.
func (p *plan) encoded() bool {
	for _, f := range p.files {
		if f.encoding != "" {
			return true
		}
	}
	return false
}

func (p *plan) bytes() int64 {
	var n int64
	for _, f := range p.files {
		n += f.size
	}
	return n
}

// codecByName finds the codec of a format: the registry's (tests give
// their own).
var codecByName = codecs.ByName

// makePlan decides what to write: the files as added, or a new layout made
// by the target format's planner.
func makePlan(m *objects.Manifest, opts Options, frames func(string, int64) ([][]byte, error)) (*plan, error) {
	target := opts.Format
	if target == "" {
		target = m.Format
	}
	c, _ := codecByName(target)
	layOut, _ := c.(formats.Planner)
	if layOut == nil {
		return nil, errs.New(errs.UnsupportedVersion, "checkout", "this build cannot write %s (it writes %s)", target, codecs.Planners())
	}
	wo := opts.WriteOptions
	if err := formats.CheckHonoured(layOut, wo); err != nil {
		return nil, err
	}
	if err := ValidPatterns(opts.Tensors); err != nil {
		return nil, err
	}
	p := &plan{format: target, relayout: relayout(m, opts)}
	if !p.relayout {
		p.tensors = m.Tensors
		for _, f := range m.Files {
			p.files = append(p.files, storedFile(m, f))
		}
		return p, nil
	}
	source, _ := codecByName(m.Format)
	lost, err := formats.Losses(source, layOut, m, wo)
	if err != nil {
		return nil, err
	}

	selected, read, err := selectTensors(m, opts)
	if err != nil {
		return nil, err
	}
	if len(selected) == 0 && (len(opts.Tensors) > 0 || len(m.Tensors) > 0) {
		return nil, errs.New(errs.NotFound, "checkout", "no tensor matches %q (see `mstore show`)", opts.Tensors)
	}
	req := PlanRequest{Source: m, Tensors: selected, Options: wo, Frames: frames}
	if target != m.Format {
		if req.From, err = exportFrom(req, layOut); err != nil {
			return nil, err
		}
	}
	planned, err := layOut.PlanCheckout(req)
	if err != nil {
		return nil, err
	}
	if err := formats.Settle(layOut, wo, planned, lost); err != nil {
		return nil, err
	}
	if err := cast.Config(req, planned); err != nil {
		return nil, err
	}
	if err := p.adopt(planned, selected, read); err != nil {
		return nil, err
	}
	p.files, p.note, p.leftOut = append(p.files, extraFiles(planned.Extra)...), planned.Note, lost
	for _, f := range m.Files {
		if f.Role == objects.RoleOther && planned.Extra[f.Path] == nil {
			p.files = append(p.files, storedFile(m, f))
		}
	}
	return p, nil
}

// piecesOf is the number of pieces adopt makes of f: a model of 100,000
// tensors grew its slice of pieces 40 times over.
func piecesOf(f formats.File, sources []objects.Tensor, transforms []Transform, byChunk []bool) int {
	n := 0
	for _, e := range f.Extents {
		if e.Kind == formats.TensorData && (transforms == nil || transforms[e.Tensor] == nil || byChunk != nil && byChunk[e.Tensor]) {
			n += max(1, len(sources[e.Tensor].Chunks))
			continue
		}
		n++
	}
	return n
}

// relayout reports whether a checkout of m with opts writes a layout of its
// own, not the files as added.
func relayout(m *objects.Manifest, opts Options) bool {
	return opts.Format != "" && opts.Format != m.Format || opts.WriteOptions.Relayout()
}

// adopt turns a planner's layout into the files to write, and records the
// tensors (and, for transformed ones, where their digests will be) that the
// written files must hold.
func (p *plan) adopt(planned *Planned, selected []objects.Tensor, read map[string]Expanded) error {
	l := planned.Layout
	if planned.Transforms != nil && len(planned.Transforms) != len(l.Tensors) {
		return fmt.Errorf("checkout: planner for %s returned %d tensors, %d transforms", l.Format, len(l.Tensors), len(planned.Transforms))
	}
	if planned.ByChunk != nil && (len(planned.ByChunk) != len(l.Tensors) || planned.Transforms == nil) {
		return fmt.Errorf("checkout: planner for %s returned %d tensors, %d ByChunk marks, transforms %t", l.Format, len(l.Tensors), len(planned.ByChunk), planned.Transforms != nil)
	}
	sources, transforms, byChunk := resolveReads(planned, selected, read)
	if len(sources) != len(l.Tensors) {
		return fmt.Errorf("checkout: planner for %s returned %d tensors, %d sources", l.Format, len(l.Tensors), len(sources))
	}
	p.layout, p.tree = l, planned.Tree
	p.tensors = make([]objects.Tensor, len(l.Tensors))
	prefault.Slice(p.tensors)
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
		pf := planFile{path: f.Path, size: f.Size, pieces: make([]piece, 0, piecesOf(f, sources, transforms, byChunk))}
		for j := range f.Extents {
			e := &f.Extents[j]
			switch e.Kind {
			case formats.Frame:
				pf.pieces = append(pf.pieces, piece{frame: e, size: e.Size})
			case formats.Zeros:
				pf.pieces = append(pf.pieces, piece{zeros: true, size: e.Size})
			case formats.TensorData:
				if transforms != nil && transforms[e.Tensor] != nil {
					d := &derived{source: sources[e.Tensor], transform: transforms[e.Tensor], digest: &p.tensors[e.Tensor].Digest}
					if byChunk != nil && byChunk[e.Tensor] {
						if parts := castParts(d, e.Size, e.Tensor+1); parts != nil {
							pf.pieces = append(pf.pieces, parts...)
							continue
						}
					}
					pf.pieces = append(pf.pieces, piece{derived: d, size: e.Size, tensor: int32(e.Tensor + 1)})
					continue
				}
				src := sources[e.Tensor]
				n := len(pf.pieces)
				pf.pieces = appendChunkPieces(pf.pieces, src.Size, src.Chunks)
				for i := n; i < len(pf.pieces); i++ {
					pf.pieces[i].tensor = int32(e.Tensor + 1)
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

// exportFrom is what the source format of req carries into target, or
// its refusal; a source without an Exporter carries nothing.
func exportFrom(req PlanRequest, target formats.Planner) (*formats.Export, error) {
	c, _ := codecByName(req.Source.Format)
	ex, ok := c.(formats.Exporter)
	if !ok {
		return nil, nil
	}
	return ex.Export(req, target.Name(), formats.KeepsMeta(target))
}

// extraFiles are whole files a planner adds beside its container files
// (Planned.Extra; not parsed back by the codec), each checked against its
// digest as it is written.
func extraFiles(extra map[string][]byte) []planFile {
	paths := make([]string, 0, len(extra))
	for p := range extra {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var out []planFile
	for _, p := range paths {
		b := extra[p]
		want := objects.Sum(b)
		out = append(out, planFile{path: p, size: int64(len(b)), want: &want, pieces: []piece{frameOf(b)}})
	}
	return out
}

// joinNotes joins the non-empty notes for the user.
func joinNotes(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, "; ")
}

// encoderFor is the canonical writer of a stored file's encoding, from
// the codec that stores such files, or nil.
func encoderFor(encoding string) func(io.Writer) io.WriteCloser {
	for _, c := range codecs.All() {
		if e, ok := c.(formats.Encoder); ok {
			if w, ok := e.Encoding(encoding); ok {
				return w
			}
		}
	}
	return nil
}

// storedFile is a file of the manifest written back exactly.
func storedFile(m *objects.Manifest, f objects.File) planFile {
	want := f.Digest
	pf := planFile{path: f.Path, size: f.Size, want: &want, encoding: f.Meta[formats.MetaCompression], stored: true}
	n := 0
	for _, e := range f.Extents {
		switch e.Kind {
		case objects.ExtentFrame:
			n += len(e.Data.Chunks)
		case objects.ExtentTensor:
			n += len(m.Tensors[e.Tensor].Chunks)
		default:
			n++
		}
	}
	pf.pieces = make([]piece, 0, n) // a model of 100,000 tensors: one allocation
	prefault.Slice(pf.pieces)
	for _, e := range f.Extents {
		switch e.Kind {
		case objects.ExtentFrame:
			pf.pieces = appendChunkPieces(pf.pieces, e.Size, e.Data.Chunks)
		case objects.ExtentTensor:
			t := m.Tensors[e.Tensor]
			pf.pieces = appendChunkPieces(pf.pieces, t.Size, t.Chunks)
		case objects.ExtentZeros:
			pf.pieces = append(pf.pieces, piece{zeros: true, size: e.Size})
		}
	}
	return pf
}

func chunkPieces(size int64, chunks []objects.Digest) []piece {
	return appendChunkPieces(make([]piece, 0, len(chunks)), size, chunks)
}

func appendChunkPieces(out []piece, size int64, chunks []objects.Digest) []piece {
	for i := range chunks {
		_, n := objects.ChunkBounds(size, i)
		out = append(out, piece{blob: &chunks[i], size: n})
	}
	return out
}

package onnx

import (
	"math/bits"
	"path"
	"slices"
	"sort"
	"strconv"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
)

// Defaults of PlanOptions, as onnx and ONNX Runtime write external data.
const (
	// DefaultSizeThreshold is onnx's size_threshold: smaller initializers
	// stay inside the .onnx file.
	DefaultSizeThreshold = 1024
	// DefaultAlignment is the offset alignment ONNX Runtime gives tensors
	// of AlignThreshold bytes or more, so that they can be memory-mapped.
	DefaultAlignment = 4096
	AlignThreshold   = 1 << 20
	// MaxAlignment bounds --alignment.
	MaxAlignment = 16 << 20
)

// PlanOptions says where Plan puts the tensors.
type PlanOptions struct {
	// ExternalData, when set, is the file name (beside each .onnx file)
	// of the one data file that receives every initializer of at least
	// SizeThreshold bytes. Other tensors (smaller ones, Constant values,
	// sparse and training tensors, which onnx never moves out) are written
	// inside the .onnx file. When empty, every tensor is written inside.
	ExternalData string
	// SizeThreshold: 0 means DefaultSizeThreshold.
	SizeThreshold int64
	// Alignment, when > 0 (a power of two, at most MaxAlignment), aligns
	// every tensor in the data file. 0 aligns tensors of AlignThreshold
	// bytes or more to DefaultAlignment, as ONNX Runtime does, and packs
	// the smaller ones one after the other, as onnx does.
	Alignment int64
}

// SourceFile is one .onnx file of the model to lay out again: its layout
// as parsed (or stored), with every frame extent's Bytes filled in. Its
// TensorData extents index the tensors given to Plan.
type SourceFile struct {
	Path    string
	Size    int64
	Extents []formats.Extent
}

// Plan writes the tensors of an ONNX model again, without I/O: each .onnx
// file's protobuf is copied except for the TensorProtos whose data is a
// tensor extent (and the messages that hold them, whose lengths change):
// their raw_data, float_data, double_data, external_data and
// data_location fields are replaced by raw_data (inside) or by
// external_data entries location/offset/length (and the source's checksum,
// the bytes being the same) with data_location EXTERNAL. The other fields
// keep their bytes and order; the new fields go where onnx writes them (in
// field-number order). Tensors keep the order and names Parse gives them.
//
// files are the model's .onnx files; tensors the layout's tensors, all of
// them (the graph needs every one), in Parse's order. The frames must be
// the ones those tensors were parsed from (else integrity_error).
func Plan(files []SourceFile, tensors []formats.Tensor, opts PlanOptions) (*formats.Layout, error) {
	if err := checkPlanOptions(&opts); err != nil {
		return nil, err
	}
	files = slices.Clone(files)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	names := newNamer()
	var walked []*walker
	srcs := make([]*runs, len(files))
	next := 0
	for i, f := range files {
		srcs[i] = sourceRuns(f)
		w, err := walkModel(srcs[i], f.Path, nil)
		if err != nil {
			return nil, err
		}
		for _, t := range w.tensors {
			t.name = names.assign(t, f.Path)
			if next >= len(tensors) || !sameTensor(t, tensors[next]) {
				return nil, errs.At(errs.IntegrityError, pkg, f.Path, t.at, "the frame's tensor %q (%s%v) is not the manifest's tensor %d", t.name, t.dtype(), t.dims, next)
			}
			next++
		}
		walked = append(walked, w)
	}
	if next != len(tensors) {
		return nil, errs.New(errs.IntegrityError, pkg, "the frames hold %d tensors, %d given", next, len(tensors))
	}

	l := &formats.Layout{Format: Codec.Name(), Tensors: make([]formats.Tensor, len(tensors))}
	for i, t := range tensors {
		t.Shape = slices.Clone(t.Shape)
		l.Tensors[i] = t
	}
	data := map[string]*plannedData{}
	first := 0
	for fi, w := range walked {
		p := files[fi].Path
		var df *plannedData
		if opts.ExternalData != "" {
			dp := path.Join(path.Dir(p), opts.ExternalData)
			if df = data[dp]; df == nil {
				df = &plannedData{path: dp}
				data[dp] = df
			}
		}
		e := emitter{src: srcs[fi], first: first, data: df, opts: opts}
		body, size, err := e.body(w.root)
		if err != nil {
			return nil, err
		}
		if size > MaxModelSize {
			return nil, errs.New(errs.SizeLimitExceeded, pkg, "%s would be %d bytes, past protobuf's 2 GiB; write its tensors to --external-data", p, size)
		}
		f, err := e.file(p, size, body)
		if err != nil {
			return nil, err
		}
		l.Files = append(l.Files, f)
		first += len(w.tensors)
	}
	for _, df := range data {
		if len(df.extents) > 0 {
			l.Files = append(l.Files, formats.File{Path: df.path, Size: df.size, Extents: df.extents})
		}
	}
	sort.Slice(l.Files, func(i, j int) bool { return l.Files[i].Path < l.Files[j].Path })
	for i := 1; i < len(l.Files); i++ {
		if l.Files[i].Path == l.Files[i-1].Path {
			return nil, errs.New(errs.SchemaError, pkg, "plan: external data file %s would replace a model file", l.Files[i].Path)
		}
	}
	return l, nil
}

func checkPlanOptions(opts *PlanOptions) error {
	if opts.ExternalData != "" {
		if !formats.IsMemberPath(opts.ExternalData) || path.Base(opts.ExternalData) != opts.ExternalData {
			return errs.New(errs.PathTraversal, pkg, "plan: external data name %q must be a plain file name", opts.ExternalData)
		}
		if Codec.Claims(opts.ExternalData) {
			return errs.New(errs.SchemaError, pkg, "plan: external data name %q is an .onnx name", opts.ExternalData)
		}
	}
	if opts.SizeThreshold < 0 {
		return errs.New(errs.SchemaError, pkg, "plan: negative size threshold %d", opts.SizeThreshold)
	}
	if opts.SizeThreshold == 0 {
		opts.SizeThreshold = DefaultSizeThreshold
	}
	if opts.Alignment < 0 || opts.Alignment > MaxAlignment || bits.OnesCount64(uint64(opts.Alignment)) > 1 {
		return errs.New(errs.SchemaError, pkg, "plan: alignment %d is not a power of two up to %d", opts.Alignment, MaxAlignment)
	}
	return nil
}

func sameTensor(rec *tensorRec, t formats.Tensor) bool {
	return rec.name == t.Name && rec.dtype() == t.DType && rec.size == t.Size && slices.Equal(dimsOrEmpty(rec.dims), dimsOrEmpty(t.Shape))
}

// sourceRuns rebuilds a source file from its frames, with holes where its
// tensors' bytes are.
func sourceRuns(f SourceFile) *runs {
	parts := make([]run, 0, len(f.Extents))
	for _, e := range f.Extents {
		r := run{off: e.Offset, size: e.Size}
		switch e.Kind {
		case formats.Frame:
			r.bytes = e.Bytes
		case formats.Zeros:
			r.bytes = make([]byte, e.Size)
		}
		parts = append(parts, r)
	}
	rs := newRuns(parts)
	rs.n = f.Size
	return rs
}

// plannedData is an external data file being laid out.
type plannedData struct {
	path    string
	size    int64
	extents []formats.Extent
}

// zeroPad is the zeros that padding frames point into. It is made on first
// use: as a package variable it was 16 MB of live heap in every command,
// which raised every garbage collector goal by as much.
var zeroPad = sync.OnceValue(func() []byte { return make([]byte, MaxAlignment) })

// place appends tensor i of size bytes, aligned as opts say, and returns
// its offset.
func (d *plannedData) place(i int, size int64, opts PlanOptions) int64 {
	align := opts.Alignment
	if align == 0 {
		align = 1
		if size >= AlignThreshold {
			align = DefaultAlignment
		}
	}
	if pad := (align - d.size%align) % align; pad > 0 {
		d.extents = append(d.extents, formats.Extent{Kind: formats.Frame, Offset: d.size, Size: pad, Bytes: zeroPad()[:pad]})
		d.size += pad
	}
	off := d.size
	d.extents = append(d.extents, formats.Extent{Kind: formats.TensorData, Offset: off, Size: size, Tensor: i})
	d.size += size
	return off
}

// piece is a run of a planned .onnx file: bytes copied from the source,
// literal bytes, or a tensor.
type piece struct {
	from, to int64 // a copy of source bytes, when lit == nil and tensor < 0
	lit      []byte
	tensor   int
	size     int64
}

// emitter writes one .onnx file.
type emitter struct {
	src   *runs
	first int // the layout index of the file's first tensor
	next  int
	data  *plannedData
	opts  PlanOptions
}

func copyPiece(from, to int64) piece { return piece{from: from, to: to, tensor: -1, size: to - from} }
func litPiece(b []byte) piece        { return piece{lit: b, tensor: -1, size: int64(len(b))} }

// body returns the pieces of a message's new body and their size: the
// source bytes between the messages that change, and those rewritten.
func (e *emitter) body(n *node) ([]piece, int64, error) {
	if n.tensor != nil {
		return e.tensorBody(n.tensor)
	}
	var out []piece
	var size int64
	at := n.bodyAt
	for _, c := range n.children {
		inner, innerSize, err := e.body(c)
		if err != nil {
			return nil, 0, err
		}
		hdr := protowire.AppendVarint(nil, uint64(innerSize))
		out = append(out, copyPiece(at, c.tagAt), copyPiece(c.tagAt, c.tagEnd), litPiece(hdr))
		out = append(out, inner...)
		size += c.tagAt - at + c.tagEnd - c.tagAt + int64(len(hdr)) + innerSize
		at = c.end
	}
	out = append(out, copyPiece(at, n.end))
	return out, size + n.end - at, nil
}

// tensorBody rewrites a TensorProto: its fields but those that place the
// data, with raw_data or external_data and data_location inserted in
// field-number order.
func (e *emitter) tensorBody(rec *tensorRec) ([]piece, int64, error) {
	idx := e.first + e.next
	e.next++
	var newFields []piece
	var newNum protowire.Number
	if e.data != nil && rec.initializer && rec.size > 0 && rec.size >= e.opts.SizeThreshold {
		off := e.data.place(idx, rec.size, e.opts)
		var b []byte
		entry := func(k, v string) {
			var kv []byte
			kv = appendBytesField(kv, entryKey, []byte(k))
			kv = appendBytesField(kv, entryValue, []byte(v))
			b = appendBytesField(b, tensorExternalData, kv)
		}
		entry("location", path.Base(e.data.path))
		entry("offset", strconv.FormatInt(off, 10))
		entry("length", strconv.FormatInt(rec.size, 10))
		if rec.ext != nil && rec.ext.hasSum {
			entry("checksum", rec.ext.checksum)
		}
		b = appendVarintField(b, tensorDataLocation, 1)
		newFields, newNum = []piece{litPiece(b)}, tensorExternalData
	} else {
		hdr := protowire.AppendTag(nil, tensorRawData, protowire.BytesType)
		hdr = protowire.AppendVarint(hdr, uint64(rec.size))
		newFields = []piece{litPiece(hdr), {tensor: idx, size: rec.size}}
		newNum = tensorRawData
	}
	var out []piece
	inserted := false
	for _, g := range rec.fields {
		if rec.dropped(g) {
			continue
		}
		if !inserted && g.num > newNum {
			out, inserted = append(out, newFields...), true
		}
		out = append(out, copyPiece(g.at, g.end))
	}
	if !inserted {
		out = append(out, newFields...)
	}
	var size int64
	for _, p := range out {
		size += p.size
	}
	return out, size, nil
}

// file turns the pieces of a whole .onnx file into extents: literal and
// copied bytes joined into frames between the tensors.
func (e *emitter) file(p string, size int64, pieces []piece) (formats.File, error) {
	f := formats.File{Path: p, Size: size}
	var frame []byte
	var off int64
	flush := func() {
		if len(frame) > 0 {
			f.Extents = append(f.Extents, formats.Extent{Kind: formats.Frame, Offset: off, Size: int64(len(frame)), Bytes: frame})
			off += int64(len(frame))
			frame = nil
		}
	}
	for _, pc := range pieces {
		switch {
		case pc.tensor >= 0:
			flush()
			f.Extents = append(f.Extents, formats.Extent{Kind: formats.TensorData, Offset: off, Size: pc.size, Tensor: pc.tensor})
			off += pc.size
		case pc.lit != nil:
			frame = append(frame, pc.lit...)
		case pc.size > 0:
			b, err := e.src.at(pc.from, int(pc.size))
			if err != nil {
				return formats.File{}, locate(err, p, pc.from)
			}
			if int64(len(b)) != pc.size {
				return formats.File{}, errs.At(errs.IntegrityError, pkg, p, pc.from, "the stored frame is shorter than its file")
			}
			frame = append(frame, b...)
		}
	}
	flush()
	return f, nil
}

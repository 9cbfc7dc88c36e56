package onnx

import (
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
)

const pkg = "onnx"

// What this build knows, and the bounds Parse enforces.
const (
	// MaxIRVersion is the newest ModelProto.ir_version this build reads
	// (IR 13: UINT2 and INT2).
	MaxIRVersion = 13
	// MaxDepth bounds the nesting of the messages the walker enters (the
	// ModelProto is depth 1), as protobuf's own parsers do.
	MaxDepth = 100
	// MaxModelSize is protobuf's limit on one message: a larger .onnx file
	// cannot be read by any ONNX tool.
	MaxModelSize = 1<<31 - 1
	// MaxTensors bounds the TensorProtos of one file.
	MaxTensors = 1 << 20
	// MaxDims bounds the dims of one tensor.
	MaxDims = 1024
	// maxString bounds the names, keys and values the walker reads.
	maxString = 1 << 20
)

// MaxOpsets is the newest opset of each standard domain this build knows;
// other (vendor) domains are not checked.
var MaxOpsets = map[string]uint64{
	"":                         25,
	"ai.onnx":                  25,
	"ai.onnx.ml":               5,
	"ai.onnx.training":         1,
	"ai.onnx.preview.training": 1,
}

// Codec is the ONNX codec.
var Codec formats.Codec = codec{}

type codec struct{ limits formats.Limits }

// WithLimits returns the codec with the user's cap on the parse budget.
func (codec) WithLimits(l formats.Limits) formats.Codec { return codec{limits: l} }

// Name is the format's key in manifests.
func (codec) Name() string { return "onnx" }

// Claims reports whether p is an .onnx model file. External data files are
// not claimed: Parse finds them through the models' locations and puts
// them in the layout.
func (codec) Claims(p string) bool { return strings.EqualFold(pathExt(p), ".onnx") }

func pathExt(p string) string {
	if i := strings.LastIndexByte(p, '.'); i > strings.LastIndexByte(p, '/') {
		return p[i:]
	}
	return ""
}

// model is one parsed .onnx file.
type model struct {
	path string
	size int64
	w    *walker
}

// Parse walks every .onnx file among paths, names their tensors, resolves
// their external data and returns the layout: the .onnx files and the data
// files they name, in path order; each .onnx cut into frames and the
// tensor bytes it holds (raw_data, packed float_data/double_data); each
// data file into its tensors and the bytes between them.
func (c codec) Parse(dir formats.Dir, paths []string) (*formats.Layout, error) {
	models := make([]*model, 0, len(paths))
	claimed := map[string]bool{}
	for _, p := range paths {
		if !Codec.Claims(p) {
			return nil, errs.New(errs.SchemaError, pkg, "%s is not an .onnx file", p)
		}
		claimed[p] = true
		m, err := readModel(dir, p, c.limits)
		if err != nil {
			return nil, err
		}
		models = append(models, m)
	}

	l := &formats.Layout{Format: Codec.Name()}
	names := newNamer()
	data := map[string]*dataFile{}
	for _, m := range models {
		for _, t := range m.w.tensors {
			if !utf8.ValidString(t.local) {
				return nil, errs.At(errs.SchemaError, pkg, m.path, t.at, "tensor name %q is not valid UTF-8", t.local)
			}
			t.name = names.assign(t, m.path)
			idx := len(l.Tensors)
			l.Tensors = append(l.Tensors, formats.Tensor{Name: t.name, DType: t.dtype(), Shape: dimsOrEmpty(t.dims), Size: t.size})
			if t.kind != external {
				continue
			}
			dp, err := resolvePath(m.path, t.ext)
			if err != nil {
				return nil, err
			}
			if claimed[dp] || Codec.Claims(dp) {
				return nil, errs.At(errs.SchemaError, pkg, m.path, t.ext.at, "external data location %q names an .onnx file", t.ext.location)
			}
			f := data[dp]
			if f == nil {
				f = &dataFile{path: dp}
				data[dp] = f
			}
			f.parts = append(f.parts, dataPart{tensor: idx, offset: t.ext.offset, size: t.size, from: m.path, at: t.ext.at})
		}
	}

	next := 0
	for _, m := range models {
		l.Files = append(l.Files, m.file(next))
		next += len(m.w.tensors)
	}
	dataPaths := make([]string, 0, len(data))
	for p := range data {
		dataPaths = append(dataPaths, p)
	}
	sort.Strings(dataPaths)
	for _, p := range dataPaths {
		f := data[p]
		if err := checkDataFile(dir, f); err != nil {
			return nil, err
		}
		l.Files = append(l.Files, formats.File{Path: f.path, Size: f.size, Extents: f.extents()})
	}
	sort.Slice(l.Files, func(i, j int) bool { return l.Files[i].Path < l.Files[j].Path })
	return l, nil
}

// The walker reads every byte of the file but tensor data, which it skips:
// its budget is proportional to the file.
func readModel(dir formats.Dir, p string, lim formats.Limits) (*model, error) {
	f, err := dir.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := f.Size()
	if size > MaxModelSize {
		return nil, errs.At(errs.SizeLimitExceeded, pkg, p, -1, "%d bytes: a protobuf message is limited to 2 GiB; larger models keep their tensors in external data files", size)
	}
	w, err := walkModel(newWindow(f, size), p, lim.Budget(pkg, p, size))
	if err != nil {
		return nil, err
	}
	return &model{path: p, size: size, w: w}, nil
}

// file is the layout of the .onnx file itself; its tensors are numbered
// from first.
func (m *model) file(first int) formats.File {
	info := m.w.info
	f := formats.File{Path: m.path, Size: m.size, Meta: map[string]string{
		MetaIRVersion: strconv.FormatUint(info.irVersion, 10),
		MetaOpsets:    strings.Join(info.opsets, ", "),
	}}
	if p := strings.TrimSpace(info.producer + " " + info.producerVersion); p != "" {
		f.Meta[MetaProducer] = p
	}
	if n := len(m.w.frameTensors); n > 0 {
		f.Meta[MetaFrameTensors], f.Meta[MetaFrameTensorNames] = strconv.Itoa(n), sampleNames(m.w.frameTensors)
	}
	f.Extents = make([]formats.Extent, 0, 2*len(m.w.tensors)+1) // a frame before each tensor, one after
	var off int64
	for i, t := range m.w.tensors {
		if t.kind == external {
			continue
		}
		if t.dataAt > off {
			f.Extents = append(f.Extents, formats.Extent{Kind: formats.Frame, Offset: off, Size: t.dataAt - off})
		}
		f.Extents = append(f.Extents, formats.Extent{Kind: formats.TensorData, Offset: t.dataAt, Size: t.size, Tensor: first + i})
		off = t.dataAt + t.size
	}
	if off < m.size {
		f.Extents = append(f.Extents, formats.Extent{Kind: formats.Frame, Offset: off, Size: m.size - off})
	}
	return f
}

// Meta keys of a .onnx file, for show. The frame_tensor ones are set when
// some tensors are not in the layout: those whose data is in varint or
// string fields (int64_data, …) stay in the frame, and a conversion to
// another container would lose them.
const (
	MetaIRVersion        = "ir_version"
	MetaOpsets           = "opset_import"       // "ai.onnx 17, ai.onnx.ml 3"
	MetaProducer         = "producer"           // producer_name and producer_version
	MetaFrameTensors     = "frame_tensors"      // how many
	MetaFrameTensorNames = "frame_tensor_names" // the first few, comma-separated
)

func sampleNames(names []string) string {
	const shown = 8
	if len(names) > shown {
		return strings.Join(names[:shown], ", ") + ", …"
	}
	return strings.Join(names, ", ")
}

func dimsOrEmpty(d []int64) []int64 {
	if d == nil {
		return []int64{}
	}
	return append([]int64{}, d...)
}

// namer gives tensors unique names: a tensor keeps its local name unless
// an earlier one took it; then it is qualified by its file and graph
// ("model.onnx:If_0.then_branch/w"), and numbered ("~2", "~3", …) if even
// that is taken.
type namer struct {
	taken map[string]bool
	next  map[string]int // the next number to try after a qualified name
}

func newNamer() namer { return namer{taken: map[string]bool{}, next: map[string]int{}} }

func (n namer) assign(t *tensorRec, file string) string {
	name := t.local
	if n.taken[name] {
		q := file + ":" + t.local
		if t.scope != "" {
			q = file + ":" + string(t.scope) + "/" + t.local
		}
		name = q
		// Counting on from the last number given keeps a model of many
		// tensors of one name linear.
		for k := max(n.next[q], 2); n.taken[name]; k++ {
			name = q + "~" + strconv.Itoa(k)
			n.next[q] = k + 1
		}
	}
	n.taken[name] = true
	return name
}

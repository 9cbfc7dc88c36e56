package pytorch

import (
	"encoding/binary"
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/zipfile"
)

// PlanOptions says how Plan lays tensors out.
type PlanOptions struct {
	// File is the checkpoint's path; default DefaultFile.
	File string
	// MaxShardSize, when positive, splits the tensors into shards of at
	// most this many bytes of tensor data (a larger tensor gets a shard of
	// its own): PREFIX-0000K-of-0000N.bin and PREFIX.bin.index.json, where
	// PREFIX is File without its extension, as transformers names them.
	MaxShardSize int64
}

// DefaultFile is the checkpoint Plan writes when PlanOptions.File is empty.
const DefaultFile = "pytorch_model.bin"

// Plan lays tensors out as torch.save checkpoints, without I/O: for each
// file, a zip archive (stored members, data aligned to 64 bytes) holding
// data.pkl — a pickle of an OrderedDict from each tensor's name to
// _rebuild_tensor_v2 (or _v3 for dtypes without a typed storage class) of
// its own storage — then .format_version, .storage_alignment, byteorder,
// one data/N member per tensor, and version. The pickle uses only the
// opcodes and globals this package's reader (and torch.load with
// weights_only=True) allows. CRC-32s of tensor data are CRC32 slots.
//
// Every tensor's Size must match its dtype and shape (schema_error); a
// dtype torch has no name for is unsupported_version; names must be
// unique valid UTF-8 (schema_error).
func Plan(tensors []formats.Tensor, opts PlanOptions) (*formats.Layout, error) {
	file := opts.File
	if file == "" {
		file = DefaultFile
	}
	if !formats.IsMemberPath(file) {
		return nil, errs.New(errs.PathTraversal, pkg, "plan: file %q is not a clean relative path", file)
	}
	if err := checkPlanInput(tensors); err != nil {
		return nil, err
	}
	shards := formats.SplitShards(tensors, opts.MaxShardSize)
	l := &formats.Layout{Format: Codec.Name(), Tensors: make([]formats.Tensor, len(tensors))}
	for i, t := range tensors {
		t.Shape = append([]int64{}, t.Shape...)
		l.Tensors[i] = t
	}
	prefix := strings.TrimSuffix(file, path.Ext(file))
	paths := make([]string, len(shards))
	for k, members := range shards {
		paths[k] = file
		if len(shards) > 1 {
			paths[k] = fmt.Sprintf("%s-%05d-of-%05d.bin", prefix, k+1, len(shards))
		}
		l.Files = append(l.Files, planFile(paths[k], tensors, members, false))
	}
	if len(shards) > 1 {
		body := formats.ShardIndexJSON(tensors, shards, paths)
		l.Files = append(l.Files, formats.File{Path: prefix + indexSuffix, Size: int64(len(body)), Index: true,
			Extents: []formats.Extent{{Kind: formats.Frame, Size: int64(len(body)), Bytes: body}}})
	}
	sort.Slice(l.Files, func(i, j int) bool { return l.Files[i].Path < l.Files[j].Path })
	return l, nil
}

func checkPlanInput(tensors []formats.Tensor) error {
	seen := make(map[string]bool, len(tensors))
	var total int64
	for _, t := range tensors {
		if seen[t.Name] || !utf8.ValidString(t.Name) {
			return errs.New(errs.SchemaError, pkg, "plan: tensor name %q is repeated or not UTF-8", t.Name)
		}
		seen[t.Name] = true
		elem, ok := elemSizes[t.DType]
		if _, named := torchName(t.DType); !ok || !named {
			return errs.New(errs.UnsupportedVersion, pkg, "plan: tensor %q: torch has no dtype for %s", t.Name, t.DType)
		}
		n := elem
		for _, d := range t.Shape {
			if d < 0 || d > 0 && n > math.MaxInt64/d {
				return errs.New(errs.SchemaError, pkg, "plan: tensor %q: shape %v cannot exist", t.Name, t.Shape)
			}
			n *= d
		}
		if n != t.Size {
			return errs.New(errs.SchemaError, pkg, "plan: tensor %q has size %d, %s%v needs %d", t.Name, t.Size, t.DType, t.Shape, n)
		}
		if len(t.Shape) > maxDims || total > math.MaxInt64/2-n {
			return errs.New(errs.SizeLimitExceeded, pkg, "plan: tensor %q is too large", t.Name)
		}
		total += n
	}
	return nil
}

// archiveFolder is the folder torch.save names after the file: its base
// name without the extension ("archive" when that is no clean name).
func archiveFolder(p string) string {
	base := path.Base(p)
	base = strings.TrimSuffix(base, path.Ext(base))
	if base == "" || !formats.IsMemberPath(base+"/data.pkl") {
		return "archive"
	}
	return base
}

func planFile(p string, tensors []formats.Tensor, members []int, force64 bool) formats.File {
	folder := archiveFolder(p)
	w := &zipfile.Writer{Force64: force64}
	w.Expect(len(members) + 6)
	w.AddBytes(folder+"/data.pkl", statePickle(tensors, members))
	w.AddBytes(folder+"/.format_version", []byte("1"))
	w.AddBytes(folder+"/.storage_alignment", []byte(strconv.Itoa(zipfile.Alignment)))
	w.AddBytes(folder+"/byteorder", []byte("little"))
	for key, i := range members {
		w.AddTensor(folder+"/data/"+strconv.Itoa(key), i, tensors[i].Size)
	}
	w.AddBytes(folder+"/version", []byte("3\n"))
	return w.Finish(p)
}

// pickler writes protocol 2, memoizing each global and repeated string.
type pickler struct {
	b    []byte
	memo map[string]uint32
}

func (p *pickler) op(b ...byte) { p.b = append(p.b, b...) }

func (p *pickler) get(key string) bool {
	i, ok := p.memo[key]
	if !ok {
		return false
	}
	if i < 256 {
		p.op(opBinGet, byte(i))
	} else {
		p.op(opLongBinGet)
		p.b = binary.LittleEndian.AppendUint32(p.b, i)
	}
	return true
}

func (p *pickler) put(key string) {
	i := uint32(len(p.memo))
	p.memo[key] = i
	if i < 256 {
		p.op(opBinPut, byte(i))
	} else {
		p.op(opLongBinPut)
		p.b = binary.LittleEndian.AppendUint32(p.b, i)
	}
}

func (p *pickler) global(module, name string) {
	if p.get("g:" + module + "." + name) {
		return
	}
	p.op(opGlobal)
	p.b = append(append(append(append(p.b, module...), '\n'), name...), '\n')
	p.put("g:" + module + "." + name)
}

func (p *pickler) str(s string, memo bool) {
	if memo && p.get("s:"+s) {
		return
	}
	p.op(opBinUnicode)
	p.b = binary.LittleEndian.AppendUint32(p.b, uint32(len(s)))
	p.b = append(p.b, s...)
	if memo {
		p.put("s:" + s)
	}
}

// int writes n as pickle.py does: BININT1, BININT2, BININT, else LONG1.
func (p *pickler) int(n int64) {
	switch {
	case n >= 0 && n < 1<<8:
		p.op(opBinInt1, byte(n))
	case n >= 0 && n < 1<<16:
		p.op(opBinInt2, byte(n), byte(n>>8))
	case n >= math.MinInt32 && n <= math.MaxInt32:
		p.op(opBinInt)
		p.b = binary.LittleEndian.AppendUint32(p.b, uint32(n))
	default:
		b := binary.LittleEndian.AppendUint64(nil, uint64(n))
		for len(b) > 1 && (b[len(b)-1] == 0 && b[len(b)-2] < 0x80 || b[len(b)-1] == 0xff && b[len(b)-2] >= 0x80) {
			b = b[:len(b)-1]
		}
		p.op(opLong1, byte(len(b)))
		p.b = append(p.b, b...)
	}
}

func (p *pickler) ints(ns []int64) {
	switch len(ns) {
	case 0:
		p.op(opEmptyTuple)
		return
	case 1, 2, 3:
		for _, n := range ns {
			p.int(n)
		}
		p.op(opTuple1 + byte(len(ns)-1))
		return
	}
	p.op(opMark)
	for _, n := range ns {
		p.int(n)
	}
	p.op(opTuple)
}

// statePickle is data.pkl: OrderedDict([(name, tensor), …]) with each
// tensor over its own storage, key N for the file's N-th tensor.
func statePickle(tensors []formats.Tensor, members []int) []byte {
	p := &pickler{memo: map[string]uint32{}}
	p.op(opProto, 2)
	p.global("collections", "OrderedDict")
	p.op(opEmptyTuple, opReduce)
	p.put("dict")
	for start := 0; start < len(members); start += 1000 { // batched as pickle.py does
		p.op(opMark)
		for key, i := range members[start:min(start+1000, len(members))] {
			p.tensor(tensors[i], start+key)
		}
		p.op(opSetItems)
	}
	p.op(opStop)
	return p.b
}

func (p *pickler) tensor(t formats.Tensor, key int) {
	p.str(t.Name, false)
	class := storageClass(t.DType)
	if class != "" {
		p.global("torch._utils", "_rebuild_tensor_v2")
	} else {
		p.global("torch._utils", "_rebuild_tensor_v3")
	}
	p.op(opMark)
	p.op(opMark) // the persistent id
	p.str("storage", true)
	numel := numel(t.Shape)
	if class != "" {
		p.global("torch", class)
	} else {
		p.global("torch.storage", "UntypedStorage")
		numel = t.Size
	}
	p.str(strconv.Itoa(key), false)
	p.str("cpu", true)
	p.int(numel)
	p.op(opTuple, opBinPersID)
	p.int(0) // storage offset
	p.ints(t.Shape)
	stride := make([]int64, len(t.Shape))
	for i, s := len(t.Shape)-1, int64(1); i >= 0; i-- {
		stride[i] = s
		s *= max(t.Shape[i], 1)
	}
	p.ints(stride)
	p.op(opNewFalse) // requires_grad
	p.global("collections", "OrderedDict")
	p.op(opEmptyTuple, opReduce) // backward_hooks
	if class == "" {
		name, _ := torchName(t.DType)
		p.global("torch", name)
	}
	p.op(opTuple, opReduce)
}

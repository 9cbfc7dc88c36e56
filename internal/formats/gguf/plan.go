package gguf

import (
	"encoding/binary"
	"math"
	"sort"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
)

// PlanOptions say how Plan writes one model.
type PlanOptions struct {
	// Name is the file name without ".gguf" (NAME.gguf, or
	// NAME-0000K-of-0000N.gguf when split). It may start with a directory.
	// Default "model".
	Name string
	// Version is 2 or 3; 0 means 3.
	Version uint32
	// KVs are the model's key/values, in order. split.* keys are dropped and
	// written again when the model is split.
	KVs []KV
	// Alignment, when > 0, is the data alignment (a power of two up to
	// 2^31) and is written as general.alignment, in place if the key/values
	// have it, else last; 0 keeps general.alignment of KVs, or 32.
	Alignment int64
	// SplitMaxTensors, when > 0, starts a new file every that many tensors.
	SplitMaxTensors int
	// SplitMaxSize, when > 0, starts a new file before a tensor that would
	// take the current one's tensor data (each tensor padded to the
	// alignment) past that many bytes. A larger tensor gets a file of its
	// own.
	SplitMaxSize int64
}

// DefaultName is the file name Plan uses when PlanOptions.Name is empty.
const DefaultName = "model"

// maxShards is the most split.count (a u16) can say.
const maxShards = math.MaxUint16

// Plan lays tensors (in the given order) out as GGUF files, without I/O.
// Each file is what llama.cpp's gguf writer emits: header, key/values,
// tensor infos (n_dims = len(Shape), dims reversed; a scalar gets shape
// [1], as in ggml), zero padding to the
// alignment, then each tensor followed by zero padding to the alignment.
// Split as gguf-split does: the first file has every key/value, then
// split.no, split.tensors.count and split.count; the others only those
// three (and general.alignment when it is not 32, which gguf-split omits
// and a reader needs). Frame extents carry their bytes; File.Meta is what
// Parse would give.
//
// Names must pass CheckName and be unique, every dtype must be a GGUF type
// and every Size must match its dtype and shape (schema_error otherwise; an
// unknown dtype is unsupported_version).
func Plan(tensors []formats.Tensor, opts PlanOptions) (*formats.Layout, error) {
	name := opts.Name
	if name == "" {
		name = DefaultName
	}
	if !formats.IsMemberPath(name + ".gguf") {
		return nil, errs.New(errs.PathTraversal, pkg, "plan: name %q is not a clean relative path", name)
	}
	version := opts.Version
	if version == 0 {
		version = 3
	}
	if version != 2 && version != 3 {
		return nil, errs.New(errs.UnsupportedVersion, pkg, "plan: GGUF version %d (this build writes 2 and 3)", version)
	}
	types, err := checkPlanTensors(tensors)
	if err != nil {
		return nil, err
	}
	kvs, a, err := planKVs(opts.KVs, opts.Alignment)
	if err != nil {
		return nil, err
	}
	shards := splitTensors(tensors, a, opts.SplitMaxTensors, opts.SplitMaxSize)
	if len(shards) > maxShards {
		return nil, errs.New(errs.SizeLimitExceeded, pkg, "plan: %d files, split.count holds at most %d", len(shards), maxShards)
	}
	l := &formats.Layout{Format: Codec.Name(), Tensors: make([]formats.Tensor, len(tensors))}
	for i, t := range tensors {
		// A scalar is written as ggml holds it, one dimension of 1: other
		// readers (gguf-parser-go) refuse n_dims 0.
		t.Shape = append([]int64{}, t.Shape...)
		if len(t.Shape) == 0 {
			t.Shape = []int64{1}
		}
		l.Tensors[i] = t
	}
	tensors = l.Tensors
	for k, members := range shards {
		fileKVs, p := kvs, name+".gguf"
		if len(shards) > 1 {
			fileKVs, p = shardKVs(kvs, a, k, len(shards), len(tensors)), ShardName(name, k+1, len(shards))
		}
		l.Files = append(l.Files, planFile(p, version, a, fileKVs, tensors, types, members))
	}
	sort.Slice(l.Files, func(i, j int) bool { return l.Files[i].Path < l.Files[j].Path })
	return l, nil
}

func checkPlanTensors(tensors []formats.Tensor) ([]TypeID, error) {
	types := make([]TypeID, len(tensors))
	seen := make(map[string]bool, len(tensors))
	var total int64
	for i, t := range tensors {
		if err := CheckName(t.Name); err != nil {
			return nil, err
		}
		if seen[t.Name] {
			return nil, errs.New(errs.SchemaError, pkg, "plan: tensor %q appears twice", t.Name)
		}
		seen[t.Name] = true
		if len(t.Shape) > MaxDims {
			return nil, errs.New(errs.SchemaError, pkg, "plan: tensor %q has %d dimensions, GGUF has at most %d", t.Name, len(t.Shape), MaxDims)
		}
		size, err := TensorSize(t.DType, t.Shape)
		if err != nil {
			return nil, errs.New(errs.ClassOf(err), pkg, "plan: tensor %q: %s", t.Name, msgOf(err))
		}
		if size != t.Size {
			return nil, errs.New(errs.SchemaError, pkg, "plan: tensor %q has size %d, %s%v needs %d", t.Name, t.Size, t.DType, t.Shape, size)
		}
		if total > math.MaxInt64/2-size {
			return nil, errs.New(errs.SizeLimitExceeded, pkg, "plan: tensors total more than 2^62 bytes")
		}
		total += size
		types[i], _ = TypeByName(t.DType)
	}
	return types, nil
}

// planKVs drops split keys, checks the values and sets general.alignment.
func planKVs(in []KV, alignment int64) ([]KV, int64, error) {
	out := make([]KV, 0, len(in)+1)
	seen := make(map[string]bool, len(in))
	for _, kv := range in {
		if err := checkKey(kv.Key); err != nil {
			return nil, 0, err
		}
		if seen[kv.Key] {
			return nil, 0, errs.New(errs.SchemaError, pkg, "plan: key %q appears twice", kv.Key)
		}
		seen[kv.Key] = true
		if err := checkValue(kv.Value); err != nil {
			return nil, 0, errs.New(errs.ClassOf(err), pkg, "plan: key %q: %s", kv.Key, msgOf(err))
		}
		if !IsSplitKey(kv.Key) {
			out = append(out, kv)
		}
	}
	if alignment == 0 {
		a, err := alignmentOf(out)
		return out, a, err
	}
	if alignment < 0 || alignment > 1<<31 || alignment&(alignment-1) != 0 {
		return nil, 0, errs.New(errs.SchemaError, pkg, "plan: alignment %d is not a power of two up to 2^31", alignment)
	}
	v := Uint32Value(uint32(alignment))
	for i := range out {
		if out[i].Key == KeyAlignment {
			out[i].Value = v
			return out, alignment, nil
		}
	}
	if alignment != DefaultAlignment {
		out = append(out, KV{Key: KeyAlignment, Value: v})
	}
	return out, alignment, nil
}

// shardKVs are the key/values of shard k (from 0) of n.
func shardKVs(kvs []KV, a int64, k, n, total int) []KV {
	var out []KV
	if k == 0 {
		out = append(out, kvs...)
	} else if a != DefaultAlignment {
		out = append(out, KV{Key: KeyAlignment, Value: Uint32Value(uint32(a))})
	}
	return append(out,
		KV{Key: KeySplitNo, Value: Uint16Value(uint16(k))},
		KV{Key: KeySplitTensors, Value: Int32Value(int32(total))},
		KV{Key: KeySplitCount, Value: Uint16Value(uint16(n))})
}

// splitTensors groups tensor indexes into files, as gguf-split does; there
// is always one file, possibly without tensors.
func splitTensors(tensors []formats.Tensor, a int64, maxTensors int, maxSize int64) [][]int {
	var shards [][]int
	var cur []int
	var curSize int64
	for i, t := range tensors {
		padded := align(t.Size, a)
		full := maxTensors > 0 && len(cur) >= maxTensors ||
			maxSize > 0 && len(cur) > 0 && padded > maxSize-curSize
		if full {
			shards = append(shards, cur)
			cur, curSize = nil, 0
		}
		cur = append(cur, i)
		curSize += padded
	}
	return append(shards, cur)
}

func planFile(p string, version uint32, a int64, kvs []KV, tensors []formats.Tensor, types []TypeID, members []int) formats.File {
	n := int64(4 + 4 + 8 + 8)
	for _, kv := range kvs {
		n += kvSize(kv)
	}
	for _, i := range members {
		n += 8 + int64(len(tensors[i].Name)) + 4 + 8*int64(len(tensors[i].Shape)) + 4 + 8
	}
	hdr := make([]byte, 0, n)
	hdr = append(hdr, Magic...)
	hdr = binary.LittleEndian.AppendUint32(hdr, version)
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(members)))
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(kvs)))
	kvEnds := make([]int64, len(kvs))
	for i, kv := range kvs {
		hdr = appendKV(hdr, kv)
		kvEnds[i] = int64(len(hdr))
	}
	var off int64
	for _, i := range members {
		t := tensors[i]
		hdr = appendString(hdr, t.Name)
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(t.Shape)))
		for j := len(t.Shape) - 1; j >= 0; j-- {
			hdr = binary.LittleEndian.AppendUint64(hdr, uint64(t.Shape[j]))
		}
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(types[i]))
		hdr = binary.LittleEndian.AppendUint64(hdr, uint64(off))
		off = align(off+t.Size, a)
	}
	f := formats.File{Path: p, Meta: fileMeta(version, a, kvs)}
	b := extentBuilder{out: make([]formats.Extent, 0, extentsAbout(len(kvEnds), len(members)))}
	b.addHeader(kvEnds, int64(len(hdr)), hdr) // cut as Parse cuts it
	// gguf-py pads before tensor data only: a vocabulary file ends at its
	// key/values.
	if len(members) > 0 {
		b.zeros(align(b.pos, a) - b.pos)
	}
	for _, i := range members {
		b.add(formats.Extent{Kind: formats.TensorData, Size: tensors[i].Size, Tensor: i})
		b.zeros(align(b.pos, a) - b.pos)
	}
	f.Extents, f.Size = b.out, b.pos
	return f
}

func (b *extentBuilder) zeros(n int64) {
	if n > 0 {
		b.add(formats.Extent{Kind: formats.Zeros, Size: n})
	}
}

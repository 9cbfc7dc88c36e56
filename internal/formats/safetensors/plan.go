package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
)

// PlanOptions says how Plan lays tensors out.
type PlanOptions struct {
	// Metadata is written as __metadata__ (first in the header, keys
	// sorted) in every file; it is left out when empty.
	Metadata map[string]string
	// MaxShardSize, when positive, splits the tensors into Hugging Face
	// style shards of at most this many bytes of tensor data (headers are
	// not counted, as in transformers' max_shard_size). When everything
	// fits in one shard, one unsharded file is written, as transformers
	// does.
	MaxShardSize int64
	// Name is the files' name without extension: NAME.safetensors, or
	// NAME-0000K-of-0000N.safetensors and NAME.safetensors.index.json. It
	// may start with a directory ("sub/model"). Default "model".
	Name string
}

// DefaultName is the name Plan uses when PlanOptions.Name is empty.
const DefaultName = "model"

// Plan lays tensors out as canonical SafeTensors files, without I/O. The
// tensors keep the given order, within and across shards. Each header is
// what the reference writer emits for that order: compact JSON,
// {"dtype","shape","data_offsets"} per tensor, padded with spaces to a
// multiple of 8 bytes so that the data that follows is aligned. Frame
// extents carry their literal bytes.
//
// Sharding is greedy: a new shard starts when the next tensor would take
// the current one past MaxShardSize and the current one is not empty, so a
// tensor larger than the limit gets a shard of its own. (Hugging Face's
// splitter moves such a tensor ahead of the shard being filled; keeping the
// given order is simpler to check and loads the same.)
//
// Every tensor's Size must match its dtype and shape (schema_error); a dtype
// SafeTensors does not have is unsupported_version; names must be unique
// valid UTF-8 (schema_error).
func Plan(tensors []formats.Tensor, opts PlanOptions) (*formats.Layout, error) {
	name := opts.Name
	if name == "" {
		name = DefaultName
	}
	if !formats.IsMemberPath(name + indexSuffix) {
		return nil, errs.New(errs.PathTraversal, pkg, "plan: name %q is not a clean relative path", name)
	}
	if err := checkPlanInput(tensors, opts.Metadata); err != nil {
		return nil, err
	}
	shards := formats.SplitShards(tensors, opts.MaxShardSize)

	l := &formats.Layout{Format: Codec.Name(), Tensors: make([]formats.Tensor, len(tensors))}
	for i, t := range tensors {
		t.Shape = append([]int64{}, t.Shape...)
		l.Tensors[i] = t
	}
	var meta map[string]string
	if len(opts.Metadata) > 0 {
		meta = make(map[string]string, len(opts.Metadata))
		for k, v := range opts.Metadata {
			meta[k] = v
		}
	}
	shardPaths := make([]string, len(shards))
	for k, members := range shards {
		shardPaths[k] = name + containerSuffix
		if len(shards) > 1 {
			shardPaths[k] = fmt.Sprintf("%s-%05d-of-%05d%s", name, k+1, len(shards), containerSuffix)
		}
		f, err := planFile(shardPaths[k], tensors, members, meta)
		if err != nil {
			return nil, err
		}
		l.Files = append(l.Files, f)
	}
	if len(shards) > 1 {
		body := formats.ShardIndexJSON(tensors, shards, shardPaths)
		l.Files = append(l.Files, formats.File{
			Path: name + indexSuffix, Size: int64(len(body)), Index: true,
			Extents: []formats.Extent{{Kind: formats.Frame, Size: int64(len(body)), Bytes: body}},
		})
	}
	sort.Slice(l.Files, func(i, j int) bool { return l.Files[i].Path < l.Files[j].Path })
	return l, nil
}

func checkPlanInput(tensors []formats.Tensor, meta map[string]string) error {
	seen := make(map[string]bool, len(tensors))
	var total int64
	for _, t := range tensors {
		if seen[t.Name] {
			return errs.New(errs.SchemaError, pkg, "plan: tensor %q appears twice", t.Name)
		}
		seen[t.Name] = true
		if !utf8.ValidString(t.Name) || t.Name == metadataKey {
			return errs.New(errs.SchemaError, pkg, "plan: %q cannot be a SafeTensors tensor name", t.Name)
		}
		size, err := TensorSize(t.DType, t.Shape)
		if err != nil {
			return locate(err, "", -1, t.Name)
		}
		if size != t.Size {
			return errs.New(errs.SchemaError, pkg, "plan: tensor %q has size %d, %s%v needs %d", t.Name, t.Size, t.DType, t.Shape, size)
		}
		if total > math.MaxInt64/2-size { // leaves room for headers
			return errs.New(errs.SizeLimitExceeded, pkg, "plan: tensors total more than 2^62 bytes")
		}
		total += size
	}
	for k, v := range meta {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return errs.New(errs.SchemaError, pkg, "plan: metadata %q is not valid UTF-8", k)
		}
	}
	return nil
}

func planFile(p string, tensors []formats.Tensor, members []int, meta map[string]string) (formats.File, error) {
	// Sized up front: growing a multi-megabyte header by appends would
	// allocate several times its size.
	estimate := lengthPrefix + 16
	for k, v := range meta {
		estimate += len(k) + len(v) + 8
	}
	for _, i := range members {
		estimate += len(tensors[i].Name) + 80 + 20*len(tensors[i].Shape)
	}
	hdr := make([]byte, lengthPrefix, min(estimate, lengthPrefix+MaxHeaderSize+8))
	hdr = append(hdr, '{')
	if len(meta) > 0 {
		hdr = appendCompactString(hdr, metadataKey)
		hdr = append(hdr, ':', '{')
		for i, k := range sortedKeys(meta) {
			if i > 0 {
				hdr = append(hdr, ',')
			}
			hdr = appendCompactString(hdr, k)
			hdr = append(hdr, ':')
			hdr = appendCompactString(hdr, meta[k])
		}
		hdr = append(hdr, '}')
	}
	var off int64
	for _, i := range members {
		t := tensors[i]
		if len(hdr) > lengthPrefix+1 { // not the first member
			hdr = append(hdr, ',')
		}
		hdr = appendCompactString(hdr, t.Name)
		hdr = append(hdr, `:{"dtype":`...)
		hdr = appendCompactString(hdr, t.DType)
		hdr = append(hdr, `,"shape":[`...)
		for j, d := range t.Shape {
			if j > 0 {
				hdr = append(hdr, ',')
			}
			hdr = strconv.AppendInt(hdr, d, 10)
		}
		hdr = append(hdr, `],"data_offsets":[`...)
		hdr = strconv.AppendInt(hdr, off, 10)
		hdr = append(hdr, ',')
		off += t.Size
		hdr = strconv.AppendInt(hdr, off, 10)
		hdr = append(hdr, ']', '}')
		if len(hdr) > lengthPrefix+MaxHeaderSize {
			break // refused below; stop growing
		}
	}
	hdr = append(hdr, '}')
	for len(hdr)%8 != 0 { // lengthPrefix is 8, so this pads the header itself
		hdr = append(hdr, ' ')
	}
	n := len(hdr) - lengthPrefix
	if n > MaxHeaderSize {
		return formats.File{}, errs.New(errs.SizeLimitExceeded, pkg, "plan: %s: header over the %d-byte limit", p, MaxHeaderSize)
	}
	binary.LittleEndian.PutUint64(hdr, uint64(n))
	frame := hdr
	frameSize := int64(len(frame))
	f := formats.File{Path: p, Size: frameSize + off, Meta: meta}
	f.Extents = append(make([]formats.Extent, 0, 1+len(members)),
		formats.Extent{Kind: formats.Frame, Size: frameSize, Bytes: frame})
	pos := frameSize
	for _, i := range members {
		f.Extents = append(f.Extents, formats.Extent{Kind: formats.TensorData, Offset: pos, Size: tensors[i].Size, Tensor: i})
		pos += tensors[i].Size
	}
	return f, nil
}

// sortedKeys returns m's keys in byte order, which for UTF-8 is code point
// order, the order of Python's sort_keys.
func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// appendCompactString quotes s as serde_json does (the reference writer):
// only '"', '\\' and control bytes are escaped; other text is kept as UTF-8.
func appendCompactString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		b = formats.AppendJSONByte(b, s[i])
	}
	return append(b, '"')
}

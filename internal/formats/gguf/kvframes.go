package gguf

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

// Key/values in frames of their own.
//
// A tokenizer (tokens, scores, token types, merges) is most of a GGUF
// header: 724 KB of the tiny llama, megabytes for a 150k vocabulary. A
// version with other weights, or a split of the same model, holds the same
// key/value bytes at another offset. So Parse cuts the header frame at the
// bounds of every key/value of at least KVFrameMin bytes: each is a frame
// extent of its own (a blob named by those bytes alone, stored once for
// every version that holds it), and the bytes between them (the fixed
// header, small key/values, the tensor infos) are frames as before.
//
// The manifest does not carry such an array a second time: File.StoredMeta's
// gguf.kv writes it as a reference to the extent that holds it,
//
//	{"key":"tokenizer.ggml.tokens","type":"arr","elem":"str","count":32000,"first":["<unk>",…],"frame":1}
//
// where frame indexes File.Extents and the extent's bytes are the key/value
// as the file holds it (key, type, value). show prints count and first;
// diff compares the frames' digests; a checkout that writes the key/values
// again reads them back from the frame (PlanRequest.Frames). A manifest
// written before holds every value inline and reads as it always did.

// KVFrameMin is the size from which a key/value is a frame of its own:
// below it, a blob and a manifest entry cost more than they can share.
const KVFrameMin = 4 << 10

// fixedHeader is the magic, version and counts before the first key/value.
const fixedHeader = 4 + 4 + 8 + 8

// headerFrames cuts the header [0, infoEnd) into frame extents. own[i] is
// the index of the extent that holds kvs[i] alone, or -1.
func headerFrames(kvEnds []int64, infoEnd int64) (frames []formats.Extent, own []int) {
	own = make([]int, len(kvEnds))
	add := func(from, to int64) {
		frames = append(frames, formats.Extent{Kind: formats.Frame, Offset: from, Size: to - from})
	}
	start, piece := int64(fixedHeader), int64(0)
	for i, end := range kvEnds {
		own[i] = -1
		if end-start >= KVFrameMin {
			if start > piece {
				add(piece, start)
			}
			own[i] = len(frames)
			add(start, end)
			piece = end
		}
		start = end
	}
	if infoEnd > piece || len(frames) == 0 {
		add(piece, infoEnd)
	}
	return frames, own
}

// storedKVs is gguf.kv as the manifest keeps it: an array in a frame of its
// own (own[i] ≥ 0) by reference, everything else as EncodeKVs writes it.
func storedKVs(kvs []KV, own []int) string {
	refs := false
	for _, e := range own {
		refs = refs || e >= 0
	}
	if !refs {
		return string(EncodeKVs(kvs))
	}
	b := []byte{'['}
	for i, kv := range kvs {
		if i > 0 {
			b = append(b, ',')
		}
		if own[i] < 0 || !kv.Value.Array {
			b = append(b, bytes.TrimSuffix(bytes.TrimPrefix(EncodeKVs(kvs[i:i+1]), []byte{'['}), []byte{']'})...)
			continue
		}
		v := kv.Value
		b = append(b, `{"key":`...)
		b = appendJSONString(b, kv.Key)
		b = append(b, `,"type":"arr","elem":"`...)
		b = append(b, v.Type.String()...)
		b = append(b, `","count":`...)
		b = strconv.AppendInt(b, int64(v.Len()), 10)
		b = append(b, `,"first":[`...)
		for j := range min(v.Len(), ggufFirstElems) {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendJSONElem(b, v, j)
		}
		b = append(b, `],"frame":`...)
		b = strconv.AppendInt(b, int64(own[i]), 10)
		b = append(b, '}')
	}
	return string(append(b, ']'))
}

// frameRef is a key/value the manifest keeps by reference: Value holds its
// first elements only.
type frameRef struct {
	count  int
	extent int
	digest objects.Digest // the frame's, when the manifest was at hand
}

// manifestKVs decodes a manifest file's gguf.kv, references included (their
// Values hold the first elements; refs says which, by index).
func manifestKVs(f objects.File) (kvs []KV, refs map[int]frameRef, err error) {
	kvs, refs, err = decodeKVs([]byte(f.Meta[MetaKV]), true)
	if err != nil {
		return nil, nil, err
	}
	for i, r := range refs {
		if r.extent >= len(f.Extents) || f.Extents[r.extent].Kind != objects.ExtentFrame || f.Extents[r.extent].Data == nil {
			return nil, nil, errs.New(errs.SchemaError, pkg, "%s: key %q is kept in extent %d, which is not a frame", f.Path, kvs[i].Key, r.extent)
		}
		r.digest = f.Extents[r.extent].Data.Digest
		refs[i] = r
	}
	return kvs, refs, nil
}

// resolvedKVs is a manifest file's key/values in full: those kept by
// reference are read back from their frames (verified blobs, through
// frames), parsed, and must be the key, type, count and first elements
// the manifest says.
func resolvedKVs(f objects.File, frames func(path string, limit int64) ([][]byte, error)) ([]KV, error) {
	kvs, refs, err := manifestKVs(f)
	if err != nil || len(refs) == 0 {
		return kvs, err
	}
	if frames == nil {
		return nil, errs.New(errs.UnsupportedVersion, "checkout", "%s: its key/values are kept in its frames, which this caller does not give", f.Path)
	}
	bs, err := frames(f.Path, MaxHeaderSize)
	if err != nil {
		return nil, err
	}
	for i, r := range refs {
		if r.extent >= len(bs) {
			return nil, errs.New(errs.IntegrityError, "checkout", "%s: frame %d of key %q is missing", f.Path, r.extent, kvs[i].Key)
		}
		kv, err := parseKVFrame(bs[r.extent], f.Path)
		if err != nil {
			return nil, err
		}
		want := kvs[i]
		want.Value.count = 0
		first := firstElems(kv.Value, min(kv.Value.Len(), ggufFirstElems))
		if kv.Key != want.Key || !kv.Value.Array || kv.Value.Type != want.Value.Type || kv.Value.Len() != r.count || !first.Equal(want.Value) {
			return nil, errs.New(errs.IntegrityError, "checkout", "%s: the frame that keeps key %q holds another key/value (%q)", f.Path, want.Key, kv.Key)
		}
		kvs[i] = kv
	}
	return kvs, nil
}

// firstElems is v cut to its first n elements.
func firstElems(v Value, n int) Value {
	if v.Type == TypeString {
		v.Strs = v.Strs[:n:n]
		return v
	}
	v.Raw = v.Raw[: n*v.Type.width() : n*v.Type.width()]
	return v
}

// parseKVFrame reads the one key/value that a frame of its own holds.
func parseKVFrame(b []byte, p string) (KV, error) {
	s := &scanner{r: bufio.NewReaderSize(bytes.NewReader(b), 64<<10), size: int64(len(b)), path: p,
		budget: formats.Limits{}.Budget(pkg, p, int64(len(b)))}
	bad := func(err error) (KV, error) {
		return KV{}, errs.Wrap(errs.IntegrityError, "checkout", err, "%s: a key/value frame", p)
	}
	key, err := s.str("key")
	if err != nil {
		return bad(err)
	}
	if err := checkKey(key); err != nil {
		return bad(err)
	}
	v, err := readValue(s)
	if err != nil {
		return bad(err)
	}
	if s.pos != s.size {
		return KV{}, errs.New(errs.IntegrityError, "checkout", "%s: %d bytes follow the key/value %q in its frame", p, s.size-s.pos, key)
	}
	return KV{Key: key, Value: v}, nil
}

// kvDigest is the digest of kv's frame, were it kept in one.
func kvDigest(kv KV) objects.Digest {
	return objects.Sum(appendKV(make([]byte, 0, kvSize(kv)), kv))
}

// decodeRef reads the reference fields of one gguf.kv entry into v (its
// first elements) and a frameRef.
func decodeRef(key string, v *Value, count *int, first json.RawMessage, extent int) (frameRef, error) {
	bad := func(format string, args ...any) error {
		return errs.New(errs.SchemaError, pkg, "key/value JSON: key %q: "+format, append([]any{key}, args...)...)
	}
	if !v.Array || count == nil || *count < 0 || extent < 0 {
		return frameRef{}, bad("a reference to a frame needs an array type, a count and a frame index")
	}
	if err := eachElem(first, v.appendJSON); err != nil {
		return frameRef{}, bad("%v", err)
	}
	if v.Len() != min(*count, ggufFirstElems) {
		return frameRef{}, bad("%d first elements of %d", v.Len(), *count)
	}
	v.count = *count
	return frameRef{count: *count, extent: extent}, nil
}

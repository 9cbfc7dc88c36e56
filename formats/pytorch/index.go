package pytorch

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mstore/mstore/formats"
	"github.com/mstore/mstore/internal/errs"
)

const indexSuffix = ".bin.index.json"

// MaxIndexSize bounds a shard index, which is read whole.
const MaxIndexSize = 100_000_000

// shardNames reads transformers' shard names, PREFIX-0000K-of-0000N.bin.
var shardNames = formats.NewShardNames(".bin")

// index is a parsed PREFIX.bin.index.json.
type index struct {
	path      string
	size      int64
	weightMap []mapping // in file order
	shards    []string  // distinct shard paths, sorted
	totalSize int64     // -1 when absent
	totalAt   int64
}

type mapping struct {
	tensor, shard string
	at            int64
}

func readIndex(dir formats.Dir, p string) (*index, error) {
	f, err := dir.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := f.Size()
	if size > MaxIndexSize {
		return nil, errs.At(errs.SizeLimitExceeded, pkg, p, 0, "index of %d bytes is over the %d-byte limit", size, MaxIndexSize)
	}
	b := make([]byte, size)
	if err := readAt(f, b, 0, p); err != nil {
		return nil, err
	}
	return parseIndex(p, b)
}

// parseIndex reads {"metadata": {"total_size": N, …}, "weight_map": {name:
// file, …}}: no other top-level keys, no repeated keys, every file a clean
// relative path.
func parseIndex(p string, b []byte) (*index, error) {
	if !utf8.Valid(b) {
		return nil, errs.At(errs.SchemaError, pkg, p, 0, "index is not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	idx := &index{path: p, size: int64(len(b)), totalSize: -1}
	bad := func(class errs.Class, format string, args ...any) error {
		return errs.At(class, pkg, p, dec.InputOffset(), format, args...)
	}
	syntax := func(err error) error {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return errs.Wrap(errs.SchemaError, pkg, err, "%s: index is not valid JSON", p)
	}
	if tok, err := dec.Token(); err != nil {
		return nil, syntax(err)
	} else if tok != json.Delim('{') {
		return nil, bad(errs.SchemaError, "index is not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntax(err)
		}
		key, _ := tok.(string)
		if seen[key] {
			return nil, bad(errs.SchemaError, "duplicate key %q", key)
		}
		seen[key] = true
		switch key {
		case "metadata":
			err = readIndexMetadata(dec, idx, bad, syntax)
		case "weight_map":
			err = readWeightMap(dec, idx, bad, syntax)
		default:
			return nil, bad(errs.SchemaError, "unknown key %q (an index has metadata and weight_map)", key)
		}
		if err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, syntax(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad(errs.SchemaError, "bytes after the index's JSON object")
	}
	if !seen["weight_map"] {
		return nil, errs.At(errs.SchemaError, pkg, p, 0, "index has no weight_map")
	}
	if len(idx.shards) == 0 {
		return nil, errs.At(errs.SchemaError, pkg, p, 0, "index names no shards: its weight_map is empty")
	}
	return idx, nil
}

type failFunc func(class errs.Class, format string, args ...any) error

func readIndexMetadata(dec *json.Decoder, idx *index, bad failFunc, syntax func(error) error) error {
	tok, err := dec.Token()
	if err != nil {
		return syntax(err)
	}
	if tok == nil {
		return nil
	}
	if tok != json.Delim('{') {
		return bad(errs.SchemaError, "metadata is not an object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return syntax(err)
		}
		key := tok.(string)
		if seen[key] {
			return bad(errs.SchemaError, "duplicate metadata key %q", key)
		}
		seen[key] = true
		var raw json.RawMessage
		at := dec.InputOffset()
		if err := dec.Decode(&raw); err != nil {
			return syntax(err)
		}
		if key != "total_size" {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
		if err != nil {
			return bad(errs.SchemaError, "metadata.total_size %s is not a non-negative integer", raw)
		}
		idx.totalSize, idx.totalAt = int64(min(n, math.MaxInt64)), at
	}
	if _, err := dec.Token(); err != nil {
		return syntax(err)
	}
	return nil
}

func readWeightMap(dec *json.Decoder, idx *index, bad failFunc, syntax func(error) error) error {
	tok, err := dec.Token()
	if err != nil {
		return syntax(err)
	}
	if tok != json.Delim('{') {
		return bad(errs.SchemaError, "weight_map is not an object")
	}
	seen := map[string]bool{}
	resolved := map[string]string{}
	dir := path.Dir(idx.path)
	for dec.More() {
		at := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return syntax(err)
		}
		name := tok.(string)
		if seen[name] {
			return bad(errs.SchemaError, "weight_map names tensor %q twice", name)
		}
		seen[name] = true
		if tok, err = dec.Token(); err != nil {
			return syntax(err)
		}
		file, ok := tok.(string)
		if !ok {
			return bad(errs.SchemaError, "weight_map value of %q must be a file name", name)
		}
		shard, ok := resolved[file]
		if !ok {
			if !formats.IsMemberPath(file) {
				return bad(errs.PathTraversal, "weight_map puts %q in %q, which is not a clean relative path inside the model directory", name, file)
			}
			shard = path.Join(dir, file)
			resolved[file] = shard
			idx.shards = append(idx.shards, shard)
		}
		idx.weightMap = append(idx.weightMap, mapping{tensor: name, shard: shard, at: at})
	}
	sort.Strings(idx.shards)
	if _, err := dec.Token(); err != nil {
		return syntax(err)
	}
	return nil
}

// checkIndex checks an index against its shards: the weight_map places
// exactly the state-dict tensors of each shard, in that shard, and
// total_size (when present) is one of the sums writers use: every tensor's
// bytes, each storage once, or each storage's first tensor once.
func checkIndex(idx *index, files map[string]*checkpoint, fileOf map[string]string) error {
	named := make(map[string]bool, len(idx.weightMap))
	for _, m := range idx.weightMap {
		named[m.tensor] = true
		got, ok := fileOf[m.tensor]
		switch {
		case !ok:
			return errs.At(errs.SchemaError, pkg, idx.path, m.at, "weight_map names tensor %q, which no file holds (expected in %s)", m.tensor, m.shard)
		case got != m.shard:
			return errs.At(errs.SchemaError, pkg, idx.path, m.at, "weight_map puts tensor %q in %s, but it is in %s", m.tensor, m.shard, got)
		}
	}
	var tensors, storages, firsts int64
	for _, s := range idx.shards {
		c := files[s]
		seen := map[*storage]bool{}
		for _, n := range c.named {
			if !named[n.name] {
				return errs.At(errs.SchemaError, pkg, idx.path, -1, "tensor %q of shard %s is missing from the weight_map", n.name, s)
			}
			tensors = addSat(tensors, numel(n.t.shape)*n.t.elem)
			if !seen[n.t.st] {
				seen[n.t.st] = true
				storages = addSat(storages, n.t.st.m.size)
				firsts = addSat(firsts, numel(n.t.shape)*n.t.elem)
			}
		}
	}
	if t := idx.totalSize; t >= 0 && t != tensors && t != storages && t != firsts {
		return errs.At(errs.SchemaError, pkg, idx.path, idx.totalAt,
			"metadata.total_size is %d, the shards' tensors hold %d bytes (%d in distinct storages)", t, tensors, storages)
	}
	return nil
}

func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Package hfindex reads Hugging Face shard indexes (PREFIX.safetensors.index.json,
// PREFIX.bin.index.json): {"metadata": {"total_size": N, …}, "weight_map":
// {tensor: shard file, …}}, strictly (no other top-level keys, no repeated
// keys, UTF-8, every shard a clean relative path inside the model
// directory), for the SafeTensors and PyTorch codecs, which check it
// against their shards.
package hfindex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
)

// MaxSize bounds a shard index, which is read whole. 100 MB holds the
// weight_map of millions of tensors.
const MaxSize = 100_000_000

// MaxDepth bounds the nesting of objects and arrays in an index (a real
// one nests two deep), before any of it is decoded.
const MaxDepth = 64

// tooDeep returns the offset where b nests deeper than MaxDepth, or -1.
func tooDeep(b []byte) int64 {
	depth, inString, escaped := 0, false, false
	for i, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > MaxDepth {
				return int64(i)
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return -1
}

// Index is a parsed shard index.
type Index struct {
	Path      string
	Size      int64
	WeightMap []Mapping // in file order
	Shards    []string  // the distinct shard paths it names, sorted
	TotalSize int64     // -1 when metadata.total_size is absent
	TotalAt   int64
	pkg       string
}

// Mapping is one weight_map entry; Shard is resolved against the index's
// directory, At is the entry's offset in the file.
type Mapping struct {
	Tensor, Shard string
	At            int64
}

// Read reads and checks the index at p in dir; errors name package pkg.
func Read(dir formats.Dir, p, pkg string) (*Index, error) {
	f, err := dir.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := f.Size()
	if size > MaxSize {
		return nil, errs.At(errs.SizeLimitExceeded, pkg, p, 0, "index of %d bytes is over the %d-byte limit", size, MaxSize)
	}
	b := make([]byte, size) // bounded just above
	n, err := f.ReadAt(b, 0)
	if n < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, errs.At(errs.InvalidArchive, pkg, p, int64(n), "index ends after %d of %d bytes", n, size)
		}
		return nil, fmt.Errorf("%s: read %s: %w", pkg, p, err)
	}
	return Parse(p, b, pkg)
}

// Parse reads the index b of path p.
func Parse(p string, b []byte, pkg string) (*Index, error) {
	if !utf8.Valid(b) {
		return nil, errs.At(errs.SchemaError, pkg, p, 0, "index is not UTF-8")
	}
	if at := tooDeep(b); at >= 0 {
		return nil, errs.At(errs.SizeLimitExceeded, pkg, p, at, "JSON nested deeper than %d levels", MaxDepth)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	idx := &Index{Path: p, Size: int64(len(b)), TotalSize: -1, pkg: pkg}
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
	if len(idx.Shards) == 0 {
		return nil, errs.At(errs.SchemaError, pkg, p, 0, "index names no shards: its weight_map is empty")
	}
	return idx, nil
}

type failFunc func(class errs.Class, format string, args ...any) error

func readIndexMetadata(dec *json.Decoder, idx *Index, bad failFunc, syntax func(error) error) error {
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
		idx.TotalSize, idx.TotalAt = int64(min(n, math.MaxInt64)), at
	}
	if _, err := dec.Token(); err != nil {
		return syntax(err)
	}
	return nil
}

func readWeightMap(dec *json.Decoder, idx *Index, bad failFunc, syntax func(error) error) error {
	tok, err := dec.Token()
	if err != nil {
		return syntax(err)
	}
	if tok != json.Delim('{') {
		return bad(errs.SchemaError, "weight_map is not an object")
	}
	seen := map[string]bool{}
	resolved := map[string]string{}
	dir := path.Dir(idx.Path)
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
			idx.Shards = append(idx.Shards, shard)
		}
		idx.WeightMap = append(idx.WeightMap, Mapping{Tensor: name, Shard: shard, At: at})
	}
	sort.Strings(idx.Shards)
	if _, err := dec.Token(); err != nil {
		return syntax(err)
	}
	return nil
}

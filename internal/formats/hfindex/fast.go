package hfindex

import (
	"path"
	"sort"
	"strconv"

	"github.com/mstore/mstore/internal/formats"
)

// parseFast reads the usual spelling of an index without encoding/json,
// whose Token walk took 0.12 s for the 1.7 MB index of 19,502 tensors (an
// add reads it twice). It takes only what it is sure of: keys and values
// that are strings without escapes or control bytes, metadata values that
// are such strings or plain non-negative integers, no repeated key, every
// shard a member path. For anything else it returns false, and Parse's
// encoding/json reading decides and reports; where it returns an index,
// it is the one that reading gives (FuzzParseFast). Parse has checked b
// for UTF-8 and depth.
func parseFast(p string, b []byte, pkg string) (*Index, bool) {
	s := scanner{b: b}
	idx := &Index{Path: p, Size: int64(len(b)), TotalSize: -1, pkg: pkg}
	seen := map[string]bool{}
	ok := s.object(func(key string, _, _ int) bool {
		if seen[key] {
			return false
		}
		seen[key] = true
		switch key {
		case "metadata":
			return s.metadata(idx)
		case "weight_map":
			return s.weightMap(idx)
		}
		return false
	})
	if s.ws(); !ok || s.i != len(b) || !seen["weight_map"] || len(idx.Shards) == 0 {
		return nil, false
	}
	return idx, true
}

// scanner reads JSON from b at i; end is where the last token read ended
// (encoding/json's Decoder.InputOffset between tokens).
type scanner struct {
	b      []byte
	i, end int
}

func (s *scanner) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// lit reads the byte c, after white space.
func (s *scanner) lit(c byte) bool {
	if s.ws(); s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		s.end = s.i
		return true
	}
	return false
}

// str reads a string without escapes or control bytes.
func (s *scanner) str() (string, bool) {
	if !s.lit('"') {
		return "", false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			v := string(s.b[start:s.i])
			s.i++
			s.end = s.i
			return v, true
		case c == '\\' || c < 0x20:
			return "", false
		}
	}
	return "", false
}

// uint reads a non-negative integer without sign, fraction, exponent or
// leading zero, and returns its text.
func (s *scanner) uint() (string, bool) {
	s.ws()
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	if n := s.i - start; n == 0 || n > 1 && s.b[start] == '0' {
		return "", false
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return "", false
	}
	s.end = s.i
	return string(s.b[start:s.i]), true
}

// object reads an object, calling member after each key to read its
// value; before is where Parse's Decoder stands before it reads the key
// (after white space: at the comma, or at the first key), after is where
// the key ends.
func (s *scanner) object(member func(key string, before, after int) bool) bool {
	if !s.lit('{') {
		return false
	}
	if s.lit('}') {
		return true
	}
	for first := true; ; first = false {
		before := s.i // lit skipped the white space
		if !first && !s.lit(',') {
			return false
		}
		key, ok := s.str()
		if !ok {
			return false
		}
		after := s.end
		if !s.lit(':') || !member(key, before, after) {
			return false
		}
		if s.lit('}') {
			return true
		}
	}
}

func (s *scanner) metadata(idx *Index) bool {
	if s.ws(); s.i+4 <= len(s.b) && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		s.end = s.i
		return true
	}
	seen := map[string]bool{}
	return s.object(func(key string, _, at int) bool {
		if seen[key] {
			return false
		}
		seen[key] = true
		if s.ws(); s.i < len(s.b) && s.b[s.i] == '"' {
			_, ok := s.str()
			return ok && key != "total_size"
		}
		v, ok := s.uint()
		if !ok {
			return false
		}
		if key == "total_size" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return false // beyond int64: left to Parse's reading
			}
			idx.TotalSize, idx.TotalAt = n, int64(at)
		}
		return true
	})
}

func (s *scanner) weightMap(idx *Index) bool {
	seen := map[string]bool{}
	resolved := map[string]string{}
	dir := path.Dir(idx.Path)
	ok := s.object(func(name string, at, _ int) bool {
		if seen[name] {
			return false
		}
		seen[name] = true
		file, ok := s.str()
		if !ok {
			return false
		}
		shard, ok := resolved[file]
		if !ok {
			if !formats.IsMemberPath(file) {
				return false
			}
			shard = path.Join(dir, file)
			resolved[file] = shard
			idx.Shards = append(idx.Shards, shard)
		}
		idx.WeightMap = append(idx.WeightMap, Mapping{Tensor: name, Shard: shard, At: int64(at)})
		return true
	})
	sort.Strings(idx.Shards)
	return ok
}

package formats

import (
	"path"
	"regexp"
	"sort"
	"strconv"

	"github.com/mstore/mstore/internal/errs"
)

// ShardID is what a Hugging Face shard name, PREFIX-0000K-of-0000N.EXT,
// says about the shard.
type ShardID struct {
	Prefix string // with the directory, e.g. "sub/model"
	K, N   int
}

// ShardNames reads and checks shard names of one extension.
type ShardNames struct{ re *regexp.Regexp }

// NewShardNames returns the shard names ending in ext (".safetensors").
func NewShardNames(ext string) ShardNames {
	return ShardNames{re: regexp.MustCompile(`^(.*)-([0-9]+)-of-([0-9]+)` + regexp.QuoteMeta(ext) + `$`)}
}

// Parse takes a shard path apart; ok is false for a path that is not a
// shard name (or whose numbers have too many digits to be real).
func (s ShardNames) Parse(p string) (id ShardID, ok bool) {
	m := s.re.FindStringSubmatch(path.Base(p))
	if m == nil {
		return ShardID{}, false
	}
	k, err1 := strconv.Atoi(m[2])
	n, err2 := strconv.Atoi(m[3])
	if err1 != nil || err2 != nil {
		return ShardID{}, false
	}
	return ShardID{Prefix: path.Join(path.Dir(p), m[1]), K: k, N: n}, true
}

// CheckSet checks that the shards an index (at indexPath) names with K-of-N
// names form complete sets: every K from 1 to N, one N per prefix. Errors
// are schema_error of package pkg.
func (s ShardNames) CheckSet(pkg, indexPath string, shards []string) error {
	type set struct {
		n    int
		have map[int]bool
	}
	sets := map[string]*set{}
	var prefixes []string
	for _, name := range shards {
		id, ok := s.Parse(name)
		if !ok {
			continue
		}
		if id.K < 1 || id.K > id.N {
			return errs.At(errs.SchemaError, pkg, indexPath, 0, "shard %s: number %d is not between 1 and %d", name, id.K, id.N)
		}
		st := sets[id.Prefix]
		if st == nil {
			st = &set{n: id.N, have: map[int]bool{}}
			sets[id.Prefix] = st
			prefixes = append(prefixes, id.Prefix)
		}
		if st.n != id.N {
			return errs.At(errs.SchemaError, pkg, indexPath, 0, "shard %s says %d shards, another says %d", name, id.N, st.n)
		}
		st.have[id.K] = true
	}
	for _, prefix := range prefixes {
		st := sets[prefix]
		// Stops at the first gap, so a huge N costs at most len(have) steps.
		for k := 1; k <= st.n; k++ {
			if !st.have[k] {
				return errs.At(errs.SchemaError, pkg, indexPath, 0,
					"shard %d of %d of %s is missing from the weight_map", k, st.n, path.Base(prefix))
			}
		}
	}
	return nil
}

// SplitShards groups tensor indexes into shards greedily, keeping their
// order: a new shard starts when the next tensor would take the current one
// past limit and the current one is not empty, so a tensor larger than the
// limit gets a shard of its own. limit ≤ 0 means one shard. There is always
// at least one shard.
func SplitShards(tensors []Tensor, limit int64) [][]int {
	var shards [][]int
	var cur []int
	var curSize int64
	for i, t := range tensors {
		if limit > 0 && len(cur) > 0 && t.Size > limit-curSize {
			shards = append(shards, cur)
			cur, curSize = nil, 0
		}
		cur = append(cur, i)
		curSize += t.Size
	}
	return append(shards, cur)
}

// ShardIndexJSON writes a shard index as transformers' save_pretrained
// does: json.dumps({"metadata": {"total_size": N}, "weight_map": {...}},
// indent=2, sort_keys=True) + "\n", where N is the sum of the tensors' sizes
// and each tensor maps to the base name of its shard's path.
func ShardIndexJSON(tensors []Tensor, shards [][]int, shardPaths []string) []byte {
	weightMap := make(map[string]string, len(tensors))
	var total int64
	estimate := 128
	for k, members := range shards {
		for _, i := range members {
			weightMap[tensors[i].Name] = path.Base(shardPaths[k])
			total += tensors[i].Size
			estimate += len(tensors[i].Name) + len(shardPaths[k]) + 16
		}
	}
	names := make([]string, 0, len(weightMap))
	for name := range weightMap {
		names = append(names, name)
	}
	sort.Strings(names) // byte order is code point order, Python's sort_keys
	b := append(make([]byte, 0, estimate), "{\n  \"metadata\": {\n    \"total_size\": "...)
	b = strconv.AppendInt(b, total, 10)
	b = append(b, "\n  },\n  \"weight_map\": {"...)
	for i, name := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "\n    "...)
		b = AppendPythonJSONString(b, name)
		b = append(b, ": "...)
		b = AppendPythonJSONString(b, weightMap[name])
	}
	return append(b, "\n  }\n}\n"...)
}

// AppendPythonJSONString quotes s as Python's json.dumps does by default
// (ensure_ascii): everything outside printable ASCII becomes \uXXXX, with
// surrogate pairs above U+FFFF.
func AppendPythonJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r < 0x20 || r == '"' || r == '\\':
			b = AppendJSONByte(b, byte(r))
		case r < 0x7f:
			b = append(b, byte(r))
		case r > 0xffff:
			r -= 0x10000
			b = appendU4(b, 0xd800+(r>>10))
			b = appendU4(b, 0xdc00+(r&0x3ff))
		default:
			b = appendU4(b, r)
		}
	}
	return append(b, '"')
}

// AppendJSONByte appends one byte of a JSON string, escaped where JSON
// requires it ('"', '\\', control bytes; the short forms where they exist).
func AppendJSONByte(b []byte, c byte) []byte {
	switch c {
	case '"':
		return append(b, '\\', '"')
	case '\\':
		return append(b, '\\', '\\')
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	if c < 0x20 {
		return appendU4(b, rune(c))
	}
	return append(b, c)
}

func appendU4(b []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
}

// CheckIndexes checks what a model's shard indexes say against its
// container files: every shard an index names is one of containers (kind
// names them in messages, e.g. ".safetensors files") and is named by one
// index only; each index's K-of-N names form complete sets; and every
// container with a shard name is named by the index its prefix calls for
// (prefix + indexSuffix). shardsOf gives the shards an index names. It
// returns each named shard's index path. Errors are schema_error of pkg.
func (s ShardNames) CheckIndexes(pkg string, containers, indexPaths []string, shardsOf func(index string) []string, indexSuffix, kind string) (map[string]string, error) {
	isContainer := make(map[string]bool, len(containers))
	for _, p := range containers {
		isContainer[p] = true
	}
	owner := map[string]string{}
	for _, ip := range indexPaths {
		shards := shardsOf(ip)
		for _, sh := range shards {
			if !isContainer[sh] {
				return nil, errs.At(errs.SchemaError, pkg, ip, 0, "weight_map names shard %s, which is not among the model's %s", sh, kind)
			}
			if other, dup := owner[sh]; dup {
				return nil, errs.At(errs.SchemaError, pkg, ip, 0, "shard %s is also named by %s", sh, other)
			}
			owner[sh] = ip
		}
		if err := s.CheckSet(pkg, ip, shards); err != nil {
			return nil, err
		}
	}
	isIndex := make(map[string]bool, len(indexPaths))
	for _, ip := range indexPaths {
		isIndex[ip] = true
	}
	for _, p := range containers {
		if _, named := owner[p]; named {
			continue
		}
		if id, ok := s.Parse(p); ok {
			want := id.Prefix + indexSuffix
			if isIndex[want] {
				return nil, errs.At(errs.SchemaError, pkg, p, -1, "shard is not named by the weight_map of %s", want)
			}
			return nil, errs.At(errs.SchemaError, pkg, p, -1, "shard has no index: %s is missing", want)
		}
	}
	return owner, nil
}

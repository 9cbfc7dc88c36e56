package gguf

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"

	"github.com/mstore/mstore/internal/errs"
)

// shardPattern is llama.cpp's split file name (llama_split_path):
// PREFIX-%05d-of-%05d.gguf, numbered from 1.
var shardPattern = regexp.MustCompile(`^(.+)-(\d{5})-of-(\d{5})\.gguf$`)

// ShardOf parses a split file name: its prefix, its number k (from 1) and
// the number of shards n.
func ShardOf(p string) (prefix string, k, n int, ok bool) {
	m := shardPattern.FindStringSubmatch(p)
	if m == nil {
		return "", 0, 0, false
	}
	k, _ = strconv.Atoi(m[2])
	n, _ = strconv.Atoi(m[3])
	return m[1], k, n, true
}

// ShardName is the file name of shard k (from 1) of n.
func ShardName(prefix string, k, n int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, k, n)
}

// splitKeys are a file's split.* key/values, as gguf-split writes them.
type splitKeys struct {
	present          bool // any split.* key
	no, count, total int64
	hasNo, hasCount  bool
	hasTotal         bool
}

// readSplitKeys finds split.no (u16), split.count (u16) and
// split.tensors.count (i32); another type is schema_error, as in
// llama.cpp's loader.
func readSplitKeys(kvs []KV) (splitKeys, error) {
	var s splitKeys
	for _, kv := range kvs {
		var want ValueType
		var dst *int64
		var has *bool
		switch kv.Key {
		case KeySplitNo:
			want, dst, has = TypeUint16, &s.no, &s.hasNo
		case KeySplitCount:
			want, dst, has = TypeUint16, &s.count, &s.hasCount
		case KeySplitTensors:
			want, dst, has = TypeInt32, &s.total, &s.hasTotal
		default:
			continue
		}
		if kv.Value.Array || kv.Value.Type != want {
			return s, errs.New(errs.SchemaError, pkg, "%s must be a %s, it is %s", kv.Key, want, describeType(kv.Value))
		}
		if want == TypeInt32 {
			*dst = kv.Value.Int(0)
		} else {
			*dst = int64(kv.Value.Uint(0))
		}
		*has, s.present = true, true
	}
	return s, nil
}

// IsSplitKey reports whether key is one of the keys a split rewrites.
func IsSplitKey(key string) bool {
	return key == KeySplitNo || key == KeySplitCount || key == KeySplitTensors
}

// checkSplits checks the split models among files. Files named
// PREFIX-0000K-of-0000N.gguf (unless N is 1 and they have no split keys)
// form one model per PREFIX: every K from 1 to N must be there, each with
// split.no = K-1, split.count = N and split.tensors.count = the tensors
// of all N shards. A file not named so must not say it is one of several
// shards. Every failure is schema_error.
func checkSplits(files []*parsedFile) error {
	type group struct {
		n       int
		members map[int]*parsedFile
		keys    map[int]splitKeys
	}
	groups := map[string]*group{}
	var prefixes []string
	for _, f := range files {
		keys, err := readSplitKeys(f.h.kvs)
		if err != nil {
			return errs.At(errs.SchemaError, pkg, f.path, -1, "%s", msgOf(err))
		}
		prefix, k, n, named := ShardOf(f.path)
		if !named || n == 1 && !keys.present {
			if err := checkStandalone(f, keys); err != nil {
				return err
			}
			continue
		}
		g := groups[prefix]
		if g == nil {
			g = &group{n: n, members: map[int]*parsedFile{}, keys: map[int]splitKeys{}}
			groups[prefix] = g
			prefixes = append(prefixes, prefix)
		}
		if n != g.n {
			return errs.At(errs.SchemaError, pkg, f.path, -1, "the name says %d shards, another shard of %s says %d", n, prefix, g.n)
		}
		if k < 1 || k > n {
			return errs.At(errs.SchemaError, pkg, f.path, -1, "shard number %d is not between 1 and %d", k, n)
		}
		g.members[k], g.keys[k] = f, keys
	}
	sort.Strings(prefixes)
	for _, prefix := range prefixes {
		g := groups[prefix]
		total := 0
		for k := 1; k <= g.n; k++ { // stops at the first gap: at most len(members)+1 steps
			f := g.members[k]
			if f == nil {
				return errs.New(errs.SchemaError, pkg, "shard %d of %d of %s is missing (%s)", k, g.n, prefix, ShardName(prefix, k, g.n))
			}
			total += len(f.h.tensors)
		}
		for k := 1; k <= g.n; k++ {
			f, keys := g.members[k], g.keys[k]
			switch {
			case !keys.hasCount || !keys.hasNo || !keys.hasTotal:
				return errs.At(errs.SchemaError, pkg, f.path, -1, "a shard of a split model needs %s, %s and %s", KeySplitNo, KeySplitCount, KeySplitTensors)
			case keys.count != int64(g.n):
				return errs.At(errs.SchemaError, pkg, f.path, -1, "%s is %d, the file name says %d shards", KeySplitCount, keys.count, g.n)
			case keys.no != int64(k-1):
				return errs.At(errs.SchemaError, pkg, f.path, -1, "%s is %d, the file name says shard %d (split.no counts from 0): a duplicated or renamed shard", KeySplitNo, keys.no, k)
			case keys.total != int64(total):
				return errs.At(errs.SchemaError, pkg, f.path, -1, "%s is %d, the %d shards hold %d tensors", KeySplitTensors, keys.total, g.n, total)
			}
		}
	}
	return nil
}

// checkStandalone checks the split keys of a file that is not a shard: at
// most one shard (a split of one, or gguf-split's merge output, which keeps
// split.count 0).
func checkStandalone(f *parsedFile, keys splitKeys) error {
	switch {
	case !keys.present || keys.hasCount && keys.count == 0:
		return nil
	case keys.hasCount && keys.count > 1:
		return errs.At(errs.SchemaError, pkg, f.path, -1, "%s says %d shards, but the file is not named PREFIX-0000K-of-%05d.gguf", KeySplitCount, keys.count, keys.count)
	case keys.hasNo && keys.no != 0:
		return errs.At(errs.SchemaError, pkg, f.path, -1, "%s is %d in a file that is not a shard", KeySplitNo, keys.no)
	case keys.hasTotal && keys.total != int64(len(f.h.tensors)):
		return errs.At(errs.SchemaError, pkg, f.path, -1, "%s is %d, the file holds %d tensors", KeySplitTensors, keys.total, len(f.h.tensors))
	}
	return nil
}

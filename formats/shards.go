package formats

import (
	"path"
	"regexp"
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

package safetensors

import (
	"path"
	"sort"
	"strings"

	"github.com/mstore/mstore/formats"
	"github.com/mstore/mstore/internal/errs"
)

const (
	containerSuffix = ".safetensors"
	indexSuffix     = ".safetensors.index.json"
)

// MaxIndexSize bounds a shard index, which is read whole. 100 MB holds the
// weight_map of millions of tensors.
const MaxIndexSize = 100_000_000

func isIndexName(p string) bool     { return strings.HasSuffix(p, indexSuffix) }
func isContainerName(p string) bool { return strings.HasSuffix(p, containerSuffix) }

// shardNames reads Hugging Face's shard names, PREFIX-0000K-of-0000N.safetensors.
var shardNames = formats.NewShardNames(".safetensors")

// index is a parsed PREFIX.safetensors.index.json.
type index struct {
	path      string
	size      int64
	weightMap []mapping // in file order
	shards    []string  // the distinct shard paths it names, sorted
	totalSize int64     // -1 when metadata.total_size is absent
	totalAt   int64
}

// mapping is one weight_map entry; shard is resolved against the index's
// directory.
type mapping struct {
	tensor, shard string
	at            int64
}

// readIndex reads and checks the syntax of an index, and that every shard it
// names is a clean path inside the model directory.
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
	b := make([]byte, size) // bounded just above
	if err := readFull(f, b, 0, p); err != nil {
		return nil, err
	}
	return parseIndex(p, b)
}

func parseIndex(p string, b []byte) (*index, error) {
	r, err := newJSONReader(b, 0, p)
	if err != nil {
		return nil, err
	}
	idx := &index{path: p, size: int64(len(b)), totalSize: -1}
	if r.peek() != '{' {
		return nil, r.fail(errs.SchemaError, "index is not a JSON object")
	}
	var haveMetadata, haveWeightMap bool
	err = r.object(func(key string, keyAt int64) error {
		switch {
		case key == "metadata" && !haveMetadata:
			haveMetadata = true
			return readIndexMetadata(r, idx)
		case key == "weight_map" && !haveWeightMap:
			haveWeightMap = true
			return readWeightMap(r, idx)
		case key == "metadata" || key == "weight_map":
			return errs.At(errs.SchemaError, pkg, p, keyAt, "duplicate key %q", key)
		default:
			return errs.At(errs.SchemaError, pkg, p, keyAt, "unknown key %q (an index has metadata and weight_map)", key)
		}
	})
	if err != nil {
		return nil, err
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	if !haveWeightMap {
		return nil, errs.At(errs.SchemaError, pkg, p, 0, "index has no weight_map")
	}
	if len(idx.shards) == 0 {
		return nil, errs.At(errs.SchemaError, pkg, p, 0, "index names no shards: its weight_map is empty")
	}
	return idx, nil
}

// readIndexMetadata reads {"total_size": N, ...}; other keys (such as
// total_parameters, which newer transformers write) are skipped, but must
// not repeat.
func readIndexMetadata(r *jsonReader, idx *index) error {
	if r.null() {
		return nil
	}
	seen := map[string]bool{}
	return r.object(func(key string, keyAt int64) error {
		if seen[key] {
			return errs.At(errs.SchemaError, pkg, r.path, keyAt, "duplicate metadata key %q", key)
		}
		seen[key] = true
		if key != "total_size" {
			return r.skip()
		}
		idx.totalAt = r.offset()
		v, err := r.uint("total_size")
		if err != nil {
			return err
		}
		idx.totalSize = int64(min(v, 1<<63-1)) // saturated: cannot match any real sum
		return nil
	})
}

func readWeightMap(r *jsonReader, idx *index) error {
	seen := map[string]bool{}
	resolved := map[string]string{} // file name as written → checked shard path; few distinct
	dir := path.Dir(idx.path)
	err := r.object(func(tensor string, keyAt int64) error {
		if seen[tensor] {
			return errs.At(errs.SchemaError, pkg, r.path, keyAt, "weight_map names tensor %q twice", tensor)
		}
		seen[tensor] = true
		if r.peek() != '"' {
			return r.fail(errs.SchemaError, "weight_map value of %q must be a file name", tensor)
		}
		valueAt := r.offset()
		file, err := r.str()
		if err != nil {
			return err
		}
		shard, ok := resolved[file]
		if !ok {
			if !formats.IsMemberPath(file) {
				return errs.At(errs.PathTraversal, pkg, r.path, valueAt,
					"weight_map puts %q in %q, which is not a clean relative path inside the model directory", tensor, file)
			}
			shard = path.Join(dir, file)
			resolved[file] = shard
		}
		idx.weightMap = append(idx.weightMap, mapping{tensor: tensor, shard: shard, at: keyAt})
		return nil
	})
	for _, shard := range resolved {
		// Distinct clean names give distinct paths: no duplicates here.
		idx.shards = append(idx.shards, shard)
	}
	sort.Strings(idx.shards)
	return err
}

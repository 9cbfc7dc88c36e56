package pytorch

import (
	"math"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/hfindex"
)

const indexSuffix = ".bin.index.json"

// shardNames reads transformers' shard names, PREFIX-0000K-of-0000N.bin.
var shardNames = formats.NewShardNames(".bin")

// readIndex reads PREFIX.bin.index.json with the shared reader.
func readIndex(dir formats.Dir, p string) (*hfindex.Index, error) { return hfindex.Read(dir, p, pkg) }

// checkIndex checks an index against its shards: the weight_map places
// exactly the state-dict tensors of each shard, in that shard, and
// total_size (when present) is one of the sums writers use: every tensor's
// bytes, each storage once, or each storage's first tensor once.
func checkIndex(idx *hfindex.Index, files map[string]*checkpoint, fileOf map[string]string) error {
	named := make(map[string]bool, len(idx.WeightMap))
	for _, m := range idx.WeightMap {
		named[m.Tensor] = true
		got, ok := fileOf[m.Tensor]
		switch {
		case !ok:
			return errs.At(errs.SchemaError, pkg, idx.Path, m.At, "weight_map names tensor %q, which no file holds (expected in %s)", m.Tensor, m.Shard)
		case got != m.Shard:
			return errs.At(errs.SchemaError, pkg, idx.Path, m.At, "weight_map puts tensor %q in %s, but it is in %s", m.Tensor, m.Shard, got)
		}
	}
	var tensors, storages, firsts int64
	for _, s := range idx.Shards {
		c := files[s]
		seen := map[*storage]bool{}
		for _, n := range c.named {
			if !named[n.name] {
				return errs.At(errs.SchemaError, pkg, idx.Path, -1, "tensor %q of shard %s is missing from the weight_map", n.name, s)
			}
			tensors = addSat(tensors, numel(n.t.shape)*n.t.elem)
			if !seen[n.t.st] {
				seen[n.t.st] = true
				storages = addSat(storages, n.t.st.m.size)
				firsts = addSat(firsts, numel(n.t.shape)*n.t.elem)
			}
		}
	}
	if t := idx.TotalSize; t >= 0 && t != tensors && t != storages && t != firsts {
		return errs.At(errs.SchemaError, pkg, idx.Path, idx.TotalAt,
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

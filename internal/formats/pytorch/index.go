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

// checkIndex checks an index against its shards: the weight_map places
// exactly the state-dict tensors of each shard, in that shard, and
// total_size (when present) is one of the sums writers use: every tensor's
// bytes, each storage once, or each storage's first tensor once.
func checkIndex(idx *hfindex.Index, files map[string]*checkpoint, fileOf map[string]string) error {
	named, err := idx.CheckPlacement(fileOf)
	if err != nil {
		return err
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

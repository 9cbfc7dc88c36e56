package safetensors

import (
	"strings"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/hfindex"
)

const (
	containerSuffix = ".safetensors"
	indexSuffix     = ".safetensors.index.json"
)

func isIndexName(p string) bool     { return strings.HasSuffix(p, indexSuffix) }
func isContainerName(p string) bool { return strings.HasSuffix(p, containerSuffix) }

// shardNames reads Hugging Face's shard names, PREFIX-0000K-of-0000N.safetensors.
var shardNames = formats.NewShardNames(".safetensors")

// hfKind tells SafeTensors files and their shard indexes apart, for the
// shared index reader.
var hfKind = hfindex.Kind{
	Pkg: pkg, IndexSuffix: indexSuffix, IsContainer: isContainerName, Names: shardNames,
	What: "a SafeTensors file or index", Containers: ".safetensors files",
}

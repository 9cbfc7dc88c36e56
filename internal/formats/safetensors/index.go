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

// readIndex reads PREFIX.safetensors.index.json with the shared reader.
func readIndex(dir formats.Dir, p string) (*hfindex.Index, error) { return hfindex.Read(dir, p, pkg) }

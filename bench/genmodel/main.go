// Command genmodel writes the generated models bench/perf.sh measures:
//
//	genmodel dense|moe|small DIR
//
// dense: 74 tensors, about 300 MB in one SafeTensors file; moe: 19,503
// tensors, about 118 MB, in 10 shards; small: 100,000 tensors of 512 B in
// one 61 MB file. The bytes are deterministic.
package main

import (
	"fmt"
	"os"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/testmodel"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: genmodel dense|moe|small DIR")
		os.Exit(2)
	}
	var tensors []formats.Tensor
	var shard int64
	switch os.Args[1] {
	case "dense":
		tensors = testmodel.Dense(8, 1024, 65536)
	case "moe":
		tensors = testmodel.MoE(50, 128, 64, 48)
		shard = 12 << 20
	case "small":
		tensors = testmodel.ManySmall(100_000, 512)
	default:
		fmt.Fprintln(os.Stderr, "genmodel: unknown model", os.Args[1])
		os.Exit(2)
	}
	if err := testmodel.WriteTensors(os.Args[2], tensors, shard, 1); err != nil {
		fmt.Fprintln(os.Stderr, "genmodel:", err)
		os.Exit(1)
	}
}

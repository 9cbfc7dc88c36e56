// Command genmodel writes the generated models bench/perf.sh measures:
//
//	genmodel [-seed N] dense|moe|small DIR
//
// dense: 74 tensors, about 300 MB in one SafeTensors file; moe: 19,503
// tensors, about 118 MB, in 10 shards; small: 100,000 tensors of 512 B in
// one 61 MB file. The bytes are deterministic: the same seed (1 unless
// given) writes the same bytes, another seed the same tensors with other
// bytes (bench/growth.sh adds such versions one after another).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/testmodel"
)

func main() {
	seed := flag.Uint64("seed", 1, "the seed of the tensors' bytes")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: genmodel [-seed N] dense|moe|small DIR")
		os.Exit(2)
	}
	var tensors []formats.Tensor
	var shard int64
	switch flag.Arg(0) {
	case "dense":
		tensors = testmodel.Dense(8, 1024, 65536)
	case "moe":
		tensors = testmodel.MoE(50, 128, 64, 48)
		shard = 12 << 20
	case "small":
		tensors = testmodel.ManySmall(100_000, 512)
	default:
		fmt.Fprintln(os.Stderr, "genmodel: unknown model", flag.Arg(0))
		os.Exit(2)
	}
	if err := testmodel.WriteTensors(flag.Arg(1), tensors, shard, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "genmodel:", err)
		os.Exit(1)
	}
}

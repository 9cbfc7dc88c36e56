package pytorch

import (
	"fmt"
	"testing"

	"github.com/mstore/mstore/internal/formats"
)

// BenchmarkParseManyTensors parses a checkpoint of 20,000 tensors of 512
// B, as torch.save writes one: 20,000 zip members, each with its local
// header and data descriptor, and a data.pkl that rebuilds each tensor.
// The per-tensor costs of the parse (the pickle machine's steps, the
// archive's maps, the reads of each member's headers) are what it times.
func BenchmarkParseManyTensors(b *testing.B) {
	const n = 20_000
	tensors := make([]formats.Tensor, n) // testmodel.ManySmall's, which imports this package
	for i := range tensors {
		tensors[i] = formats.Tensor{Name: fmt.Sprintf("model.layers.%d.block.%d.weight", i/100, i%100), DType: "F32", Shape: []int64{128}, Size: 512}
	}
	l, err := Plan(tensors, PlanOptions{})
	if err != nil {
		b.Fatal(err)
	}
	files := materialize(b, l, tensors)
	var file []byte
	for _, content := range files {
		file = content // one checkpoint
	}
	b.SetBytes(int64(len(file)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parse(file); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/tensor")
}

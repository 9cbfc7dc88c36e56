package safetensors

import (
	"fmt"
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
)

// manyTensors is a MoE-like model: n small tensors with long names.
func manyTensors(n int) []formats.Tensor {
	out := make([]formats.Tensor, n)
	for i := range out {
		out[i] = formats.Tensor{
			Name:  fmt.Sprintf("model.layers.%d.mlp.experts.%d.down_proj.weight", i/256, i%256),
			DType: "BF16", Shape: []int64{2, 2}, Size: 8,
		}
	}
	return out
}

func BenchmarkPlan100kTensors(b *testing.B) {
	tensors := manyTensors(100_000)
	for b.Loop() {
		if _, err := Plan(tensors, PlanOptions{MaxShardSize: 80_000}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse100kTensors(b *testing.B) {
	tensors := manyTensors(100_000)
	l, err := Plan(tensors, PlanOptions{MaxShardSize: 80_000})
	if err != nil {
		b.Fatal(err)
	}
	data := make([][]byte, len(tensors))
	for i := range data {
		data[i] = make([]byte, 8)
	}
	files, err := formattest.Materialize(l, data)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(l.Files)), "files")
	for b.Loop() {
		if _, err := parseFiles(files); err != nil {
			b.Fatal(err)
		}
	}
}

package testmodel

import (
	"runtime"
	"testing"

	"github.com/mstore/mstore/internal/formats"
)

// BenchModel is a generated model for the add and checkout benchmarks.
type BenchModel struct {
	Name    string
	Tensors []formats.Tensor
	Shard   int64 // MaxShardSize, 0 for one file
}

// BenchModels are the shapes the benchmarks run: few large tensors, and
// 100,000 small ones (the per-tensor costs).
func BenchModels() []BenchModel {
	return []BenchModel{
		{Name: "dense-150MB", Tensors: Dense(4, 1024, 32000)},
		{Name: "small-100k", Tensors: ManySmall(100_000, 512)},
	}
}

// Bytes is the size of the model's tensor data.
func (m BenchModel) Bytes() int64 {
	var n int64
	for _, t := range m.Tensors {
		n += t.Size
	}
	return n
}

// AllocCounter reports allocations per tensor over a benchmark's timed
// iterations: Start before them, Report after.
type AllocCounter struct{ before uint64 }

func (a *AllocCounter) Start() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	a.before = ms.Mallocs
}

func (a *AllocCounter) Report(b *testing.B, tensors int) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.Mallocs-a.before)/float64(b.N)/float64(tensors), "allocs/tensor")
}

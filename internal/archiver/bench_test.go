package archiver

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

// BenchmarkAdd adds generated models to an empty store (go test -bench Add
// ./internal/archiver): MB/s of tensor data and allocations per tensor.
func BenchmarkAdd(b *testing.B) {
	for _, m := range testmodel.BenchModels() {
		b.Run(m.Name, func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "model")
			if err := testmodel.WriteTensors(dir, m.Tensors, m.Shard, 1); err != nil {
				b.Fatal(err)
			}
			benchAdd(b, dir, m.Bytes(), len(m.Tensors))
		})
	}
}

// BenchmarkAddPyTorch adds a PyTorch checkpoint of 20,000 tensors of 512 B
// (go test -bench AddPyTorch ./internal/archiver): each member of its zip
// has a header frame of its own, so the per-tensor costs of the container
// (the unpickler, a frame blob a tensor, the read-back check's reads) show
// here where a SafeTensors model has one header.
func BenchmarkAddPyTorch(b *testing.B) {
	const n, size = 20_000, 512
	dir := filepath.Join(b.TempDir(), "model")
	writeCheckpoint(b, dir, n, size)
	benchAdd(b, dir, n*size, n)
}

// benchAdd times adds of the model in dir (size bytes of tensor data, tensors
// of them), each into a new store, and reports allocations per tensor.
func benchAdd(b *testing.B, dir string, size int64, tensors int) {
	b.SetBytes(size)
	var allocs testmodel.AllocCounter
	b.ResetTimer()
	allocs.Start()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		st, err := store.Open(filepath.Join(b.TempDir(), fmt.Sprint("store", i)), true, store.Options{LockTimeout: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := Add(context.Background(), st, dir, Options{Name: "m"}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	allocs.Report(b, tensors)
}

package archiver

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/pytorch"
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
	tensors := testmodel.ManySmall(20_000, 512)
	l, err := pytorch.Plan(tensors, pytorch.PlanOptions{})
	if err != nil {
		b.Fatal(err)
	}
	data := make([][]byte, len(l.Tensors))
	var total int64
	for i, t := range l.Tensors {
		data[i] = bytes.Repeat([]byte{byte(i), byte(i >> 8)}, int(t.Size/2))
		total += t.Size
	}
	files, err := formattest.Materialize(l, data)
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(b.TempDir(), "model")
	for p, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), content, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	benchAdd(b, dir, total, len(tensors))
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

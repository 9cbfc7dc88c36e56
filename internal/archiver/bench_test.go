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
			b.SetBytes(m.Bytes())
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
			allocs.Report(b, len(m.Tensors))
		})
	}
}

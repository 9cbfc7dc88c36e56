package restorer

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

// BenchmarkCheckout checks generated models out of a store (go test -bench
// Checkout ./internal/restorer): MB/s of tensor data and allocations per
// tensor. Beside the shared shapes, bench/genmodel's mixture of experts:
// 19,502 tensors in 10 shards, most of them packed.
func BenchmarkCheckout(b *testing.B) {
	models := append(testmodel.BenchModels(), testmodel.BenchModel{Name: "moe-19k", Tensors: testmodel.MoE(50, 128, 64, 48), Shard: 12 << 20})
	for _, m := range models {
		b.Run(m.Name, func(b *testing.B) {
			root := b.TempDir()
			dir := filepath.Join(root, "model")
			if err := testmodel.WriteTensors(dir, m.Tensors, m.Shard, 1); err != nil {
				b.Fatal(err)
			}
			st, err := store.Open(filepath.Join(root, "store"), true, store.Options{LockTimeout: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			res, err := archiver.Add(context.Background(), st, dir, archiver.Options{Name: "m"})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(m.Bytes())
			var allocs testmodel.AllocCounter
			b.ResetTimer()
			allocs.Start()
			for i := 0; i < b.N; i++ {
				if _, err := Checkout(context.Background(), st, res.Digest, filepath.Join(root, fmt.Sprint("out", i)), Options{}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			allocs.Report(b, len(m.Tensors))
		})
	}
}

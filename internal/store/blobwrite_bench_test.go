package store

import (
	"sync"
	"testing"

	"github.com/mstore/mstore/internal/objects"
)

// BenchmarkPutSmallBlobs puts 100,000 blobs of 512 B from four goroutines,
// as an add's writers do: one Put each, or PutSmall by eights.
func BenchmarkPutSmallBlobs(b *testing.B) {
	const n = 100_000
	data := randomBytes(n*512, 7)
	ds := make([]objects.Digest, n)
	for i := range ds {
		ds[i] = objects.Sum(data[i*512 : i*512+512])
	}
	for _, grouped := range []bool{false, true} {
		name := map[bool]string{false: "Put", true: "PutSmall"}[grouped]
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				w := newStore(b).NewBlobWriter(nil)
				b.StartTimer()
				var wg sync.WaitGroup
				for g := range 4 {
					wg.Go(func() {
						var msgs [8][]byte
						for i := g * 8; i+8 <= n; i += 32 {
							for k := range msgs {
								msgs[k] = data[(i+k)*512 : (i+k+1)*512]
							}
							if grouped {
								w.PutSmall(ds[i:i+8], msgs[:])
								continue
							}
							for k := range msgs {
								w.Put(ds[i+k], msgs[k])
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				w.Abort()
				b.StartTimer()
			}
		})
	}
}

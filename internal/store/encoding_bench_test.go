package store

import (
	"testing"

	"github.com/mstore/mstore/internal/objects"
)

// Repack's encode of one chunk (AppendBlob into a reused buffer, as
// repack calls it), raw MB a second: a base chunk alone (grouped) and a
// fine-tune's chunk against its base (delta).
func BenchmarkAppendBlob(b *testing.B) {
	base := weights(1, objects.ChunkSize, 0.02)
	ft := fineTune(base, 2)
	for _, c := range []struct {
		name      string
		raw, base []byte
		want      Coding
	}{{"grouped", base, nil, CodingGrouped}, {"delta", ft, base, CodingDelta}} {
		b.Run(c.name, func(b *testing.B) {
			var buf []byte
			b.SetBytes(int64(len(c.raw)))
			for b.Loop() {
				coding, out := AppendBlob(buf, c.raw, 2, c.base)
				if coding != c.want {
					b.Fatalf("coded %s, want %s", coding, c.want)
				}
				buf = out
			}
		})
	}
}

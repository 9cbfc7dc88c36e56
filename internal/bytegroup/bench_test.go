package bytegroup

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

func bf16(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, n)
	for i := 0; i+1 < n; i += 2 {
		binary.LittleEndian.PutUint16(src[i:], uint16(math.Float32bits(float32(r.NormFloat64()*0.02))>>16))
	}
	return src
}

func BenchmarkEncodeBF16(b *testing.B) {
	src := bf16(4 << 20)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		Encode(src, 2)
	}
}

func BenchmarkDecodeBF16(b *testing.B) {
	src := bf16(4 << 20)
	enc := Encode(src, 2)
	b.SetBytes(int64(len(src)))
	dst := make([]byte, len(src))
	for b.Loop() {
		Decode(dst, enc, len(src))
	}
}

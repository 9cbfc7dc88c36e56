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

// lora is a BF16 base and a fine-tune of it: base + a small dense delta
// (std 1e-3 against weights of 0.02), as a merged LoRA leaves q and v.
func lora(n int) (base, ft []byte) {
	r := rand.New(rand.NewPCG(3, 4))
	base, ft = make([]byte, n), make([]byte, n)
	for i := 0; i+1 < n; i += 2 {
		w := float32(r.NormFloat64() * 0.02)
		binary.LittleEndian.PutUint16(base[i:], uint16(math.Float32bits(w)>>16))
		binary.LittleEndian.PutUint16(ft[i:], uint16(math.Float32bits(w+float32(r.NormFloat64()*1e-3))>>16))
	}
	return base, ft
}

func BenchmarkEncodeDeltaBF16(b *testing.B) {
	base, ft := lora(4 << 20)
	b.SetBytes(int64(len(ft)))
	for b.Loop() {
		EncodeDelta(ft, base, 2)
	}
	b.ReportMetric(float64(len(EncodeDelta(ft, base, 2)))/float64(len(ft)), "ratio")
}

func BenchmarkDecodeDeltaBF16(b *testing.B) {
	base, ft := lora(4 << 20)
	enc := EncodeDelta(ft, base, 2)
	b.SetBytes(int64(len(ft)))
	dst := make([]byte, len(ft))
	for b.Loop() {
		if _, err := DecodeDelta(dst, enc, len(ft), base); err != nil {
			b.Fatal(err)
		}
	}
}

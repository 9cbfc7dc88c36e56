package bytegroup

import "testing"

func benchPlanes(n, width int) [][]byte {
	p := make([][]byte, width)
	for i := range p {
		p[i] = make([]byte, n)
	}
	return p
}

func BenchmarkSplitKeyedBF16(b *testing.B) {
	base, ft := lora(4 << 20)
	planes := benchPlanes(len(ft)/2, 2)
	b.SetBytes(int64(len(ft)))
	for b.Loop() {
		splitKeyed(ft, base, planes, 2, byDifference)
	}
}

func BenchmarkJoinKeyedBF16(b *testing.B) {
	base, ft := lora(4 << 20)
	planes := benchPlanes(len(ft)/2, 2)
	splitKeyed(ft, base, planes, 2, byDifference)
	dst := make([]byte, len(ft))
	b.SetBytes(int64(len(ft)))
	for b.Loop() {
		joinKeyed(dst, base, planes, 2, byDifference)
	}
}

func BenchmarkCursorsBF16(b *testing.B) {
	base, _ := lora(4 << 20)
	b.SetBytes(int64(len(base)))
	for b.Loop() {
		cursors(base, len(base)/2, 2, byDifference)
	}
}

func BenchmarkSplitBF16(b *testing.B) {
	src := bf16(4 << 20)
	planes := benchPlanes(len(src)/2, 2)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		split(src, planes, 2)
	}
}

func BenchmarkJoinBF16(b *testing.B) {
	src := bf16(4 << 20)
	planes := benchPlanes(len(src)/2, 2)
	split(src, planes, 2)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		join(src, planes, 2)
	}
}

//go:build !purego

package bytegroup

import "testing"

// Without BMI2 the streams are coded one by one, to the same bytes.
func TestHuffEncoderWithoutPairs(t *testing.T) {
	defer func(v bool) { havePairs = v }(havePairs)
	havePairs = false
	TestHuffEncoderIsCompress4X(t)
}

// Without BMI2 the four streams are decoded in Go, to the same bytes.
func TestHuffDecoderWithoutBMI2(t *testing.T) {
	defer func(v bool) { havePairs = v }(havePairs)
	havePairs = false
	TestHuffDecoderDecodesHuff0(t)
	TestHuffDecoderCorrupt(t)
}

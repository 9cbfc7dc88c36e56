package bytegroup

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/fse"
)

// The histogram counted here gives fse the same stream as its own count,
// for blocks of every length (the ones fse refuses included) and skew,
// one coder used for all in turn: no count is left over from the one
// before.
func TestFSEWithOurHistogramIsFSE(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var c coder
	for trial := range 300 {
		blk := make([]byte, r.IntN(70000))
		for i := range blk {
			if r.IntN(100) < trial%100 {
				blk[i] = byte(r.IntN(256))
			}
		}
		want, werr := fse.Compress(blk, &fse.Scratch{})
		got, gerr := c.fseCompress(blk)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("trial %d, %d bytes: %d bytes (%v), fse alone %d (%v)", trial, len(blk), len(got), gerr, len(want), werr)
		}
	}
}

// A block whose sample (every 16th byte) is one value is coded as that
// one value only when every byte is: a byte off the sample that differs,
// anywhere (the last included), keeps it from the one-value coding, and
// both decode to the block.
func TestOneValueBlockNeedsEveryByte(t *testing.T) {
	var c coder
	c.bs = blockSize
	for _, at := range []int{-1, 1, 7, 8, 4095, 64<<10 - 1} {
		blk := bytes.Repeat([]byte{0x3c}, 64<<10)
		if at >= 0 {
			blk[at] = 0x3d
		}
		out := c.appendPlane(nil, blk, -1, false)
		rle := len(out) >= 3 && out[0] == modeHuff && out[1] == kindRLE
		if rle != (at < 0) {
			t.Fatalf("odd byte at %d: coded as one value %v (%d bytes)", at, rle, len(out))
		}
		got := make([]byte, len(blk))
		if rest, err := c.decodePlane(out, got); err != nil || len(rest) != 0 || !bytes.Equal(got, blk) {
			t.Fatalf("odd byte at %d: %v", at, err)
		}
	}
}

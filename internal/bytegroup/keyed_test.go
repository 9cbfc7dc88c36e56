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

package bytegroup

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/huff0"
	"pgregory.net/rapid"
)

// huffEncoder writes what huff0.Compress4X writes, byte for byte, and fails
// where it fails (RLE, too flat, not smaller), over blocks of skewed,
// flat, two-valued, one-valued and 256-valued bytes of many lengths: the
// coded bytes stay what every build wrote, and huff0 decodes them.
func TestHuffEncoderIsCompress4X(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var e huffEncoder
	var s, ref huff0.Scratch
	dst := make([]byte, 0, huff0.BlockSizeMax)
	coded := 0
	for _, n := range []int{huffMin, huffMin + 1, huffMin + 3, 20000, 65536, 131072, 131071, huff0.BlockSizeMax} {
		for _, shape := range []float64{0, 0.3, 1, 2, 4, 8, 30, 64, 200, 1000} {
			blk := make([]byte, n)
			for i := range blk {
				switch {
				case shape == 0:
					blk[i] = 7
				case shape == 1000: // every byte value, nearly flat
					blk[i] = byte(r.Uint32())
				default: // geometric: shape is the mean
					blk[i] = byte(math.Min(255, r.ExpFloat64()*shape))
				}
			}
			if shape == 0.3 {
				blk[n/2] = 255 // a rare symbol: the longest codes
			}
			ref.Reuse = huff0.ReusePolicyNone
			want, _, werr := huff0.Compress4X(blk, &ref)
			got, gerr := e.compress4X([]byte{0xEE}, blk, &s)
			switch {
			case werr != nil:
				if gerr == nil || errors.Is(werr, huff0.ErrUseRLE) != errors.Is(gerr, huff0.ErrUseRLE) {
					t.Fatalf("n %d shape %v: Compress4X fails (%v), huffEncoder gives %v", n, shape, werr, gerr)
				}
				if !bytes.Equal(got, []byte{0xEE}) {
					t.Fatalf("n %d shape %v: a failed coding left bytes in out", n, shape)
				}
				continue
			case gerr != nil:
				t.Fatalf("n %d shape %v: huffEncoder fails (%v), Compress4X does not", n, shape, gerr)
			}
			if !bytes.Equal(got[1:], want) || got[0] != 0xEE {
				t.Fatalf("n %d shape %v: %d coded bytes differ from Compress4X's %d", n, shape, len(got)-1, len(want))
			}
			ref.MaxDecodedSize = n
			ds, body, err := huff0.ReadTable(got[1:], &ref)
			if err != nil {
				t.Fatal(err)
			}
			if back, err := ds.Decoder().Decompress4X(dst[:0:n], body); err != nil || !bytes.Equal(back, blk) {
				t.Fatalf("n %d shape %v: does not decode (%v)", n, shape, err)
			}
			coded++
		}
	}
	if coded < 40 {
		t.Fatalf("only %d blocks coded: the test covers little", coded)
	}
}

// The same for any block rapid draws: genData's kinds (weights' planes,
// runs, random, one value, …) at any length huffEncoder codes.
func TestHuffEncoderIsCompress4XProperty(t *testing.T) {
	var e huffEncoder
	var s, ref huff0.Scratch
	rapid.Check(t, func(t *rapid.T) {
		blk := genData(t, "block")
		if len(blk) < huffMin {
			blk = append(blk, make([]byte, huffMin-len(blk))...)
		}
		blk = blk[:min(len(blk), blockSize)]
		ref.Reuse = huff0.ReusePolicyNone
		want, _, werr := huff0.Compress4X(blk, &ref)
		got, gerr := e.compress4X(nil, blk, &s)
		if (werr == nil) != (gerr == nil) || errors.Is(werr, huff0.ErrUseRLE) != errors.Is(gerr, huff0.ErrUseRLE) {
			t.Fatalf("Compress4X: %v, huffEncoder: %v", werr, gerr)
		}
		if werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("%d coded bytes differ from Compress4X's %d", len(got), len(want))
		}
	})
}

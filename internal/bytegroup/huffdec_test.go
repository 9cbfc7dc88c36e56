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

// huff0Decode is huff0's own decoder of a block (table and streams), the
// reference huffDecoder must equal.
func huff0Decode(block []byte, n int) ([]byte, error) {
	var s huff0.Scratch
	s.MaxDecodedSize = n
	ds, body, err := huff0.ReadTable(block, &s)
	if err != nil {
		return nil, err
	}
	return ds.Decoder().Decompress4X(make([]byte, 0, n), body)
}

// ourDecode is decodePlane's way: huffDecoder's table, then its streams.
func ourDecode(d *huffDecoder, block []byte, n int) ([]byte, error) {
	body, err := d.readTable(block, n)
	if err != nil {
		return nil, err
	}
	out := make([]byte, n)
	if err := d.decode4X(out, body); err != nil {
		return nil, err
	}
	return out, nil
}

// skewedBlock is n bytes drawn from a geometric distribution of the given
// mean (0: one value; 1000: every value, nearly flat), with a rare
// symbol for the longest codes.
func skewedBlock(r *rand.Rand, n int, shape float64) []byte {
	blk := make([]byte, n)
	for i := range blk {
		switch {
		case shape == 0:
			blk[i] = 7
		case shape == 1000:
			blk[i] = byte(r.Uint32())
		default:
			blk[i] = byte(math.Min(255, r.ExpFloat64()*shape))
		}
	}
	if n > 0 {
		blk[n/2] = 255
	}
	return blk
}

// unevenBlock is n bytes of four segments (a stream each) of which
// segment k is nearly one value but for its last bytes, which are
// nearly flat: its stream reaches the end of its output while the others
// are halfway and while it still has whole windows of input, where
// nothing but the room left of its output stops it.
func unevenBlock(r *rand.Rand, n, k int) []byte {
	blk := skewedBlock(r, n, 8)
	seg := (n + 3) / 4
	part := blk[min(k*seg, n):min((k+1)*seg, n)]
	for i := range part {
		part[i] = byte(r.IntN(50) / 49)
		if i >= len(part)-64 {
			part[i] = byte(r.Uint32())
		}
	}
	return blk
}

// huffDecoder decodes what huff0.Compress4X and huffEncoder write to the
// block they coded, as huff0 does, at every length from tiny to a block
// and over distributions from nearly one value to flat (1 to 11 bit
// codes, one to four symbols a lookup, streams of unequal rates).
func TestHuffDecoderDecodesHuff0(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	var d huffDecoder
	var e huffEncoder
	var s huff0.Scratch
	decoded := 0
	lengths := []int{1, 5, 16, 17, 63, 64, 65, 100, 255, 256, 1000, 4095, huffMin, 20001, 28000, 65536, 131071, blockSize}
	for _, n := range lengths {
		for _, shape := range []float64{0, 0.05, 0.3, 1, 2, 4, 8, 30, 64, 200, 1000} {
			blk := skewedBlock(r, n, shape)
			if shape == 0.05 { // one stream far more skewed than the rest: it ends first
				blk = unevenBlock(r, n, (n/7)%4)
			}
			s.Reuse = huff0.ReusePolicyNone
			ref, _, err := huff0.Compress4X(blk, &s)
			if err != nil {
				continue
			}
			codings := [][]byte{bytes.Clone(ref)}
			if mine, err := e.compress4X(nil, blk, &s); err == nil {
				codings = append(codings, mine)
			}
			for _, coded := range codings {
				got, err := ourDecode(&d, coded, n)
				if err != nil || !bytes.Equal(got, blk) {
					t.Fatalf("n %d shape %v: decodes to other bytes (%v)", n, shape, err)
				}
				decoded++
				// One byte short or long is refused, as huff0 refuses it.
				if _, err := ourDecode(&d, coded, n+1); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("n %d shape %v: decoded to a byte more: %v", n, shape, err)
				}
				if _, err := ourDecode(&d, coded, n-1); n > 1 && !errors.Is(err, ErrCorrupt) {
					t.Fatalf("n %d shape %v: decoded to a byte less: %v", n, shape, err)
				}
			}
		}
	}
	if decoded < 150 {
		t.Fatalf("only %d blocks decoded: the test covers little", decoded)
	}
}

// The same for any block rapid draws (genData's kinds).
func TestHuffDecoderProperty(t *testing.T) {
	var d huffDecoder
	var s huff0.Scratch
	rapid.Check(t, func(t *rapid.T) {
		blk := genData(t, "block")
		blk = blk[:min(len(blk), blockSize)]
		s.Reuse = huff0.ReusePolicyNone
		coded, _, err := huff0.Compress4X(blk, &s)
		if err != nil {
			return // huff0 does not code it: nothing to decode
		}
		got, err := ourDecode(&d, coded, len(blk))
		if err != nil || !bytes.Equal(got, blk) {
			t.Fatalf("decodes to other bytes (%v)", err)
		}
	})
}

// Every byte of a coded block flipped, and every truncation: huffDecoder
// fails with ErrCorrupt or decodes what huff0 decodes, never panics.
func TestHuffDecoderCorrupt(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	var d huffDecoder
	var s huff0.Scratch
	for _, n := range []int{300, 5000} {
		blk := skewedBlock(r, n, 3)
		coded, _, err := huff0.Compress4X(blk, &s)
		if err != nil {
			t.Fatal(err)
		}
		coded = bytes.Clone(coded)
		check := func(what string, in []byte) {
			t.Helper()
			got, err := ourDecode(&d, in, n)
			want, werr := huff0Decode(in, n)
			switch {
			case err != nil && !errors.Is(err, ErrCorrupt):
				t.Fatalf("%s: %v, want ErrCorrupt", what, err)
			case err == nil && werr == nil && !bytes.Equal(got, want):
				t.Fatalf("%s: decodes to other bytes than huff0", what)
			case (err == nil) != (werr == nil):
				t.Fatalf("%s: huffDecoder %v, huff0 %v", what, err, werr)
			}
		}
		for i := range coded {
			c := bytes.Clone(coded)
			c[i] ^= 1 << (i % 8)
			check("flip", c)
			check("cut", coded[:i])
		}
	}
}

// FuzzHuffDecoder: on any bytes huffDecoder and huff0 agree: both fail, or
// both decode to the same bytes.
func FuzzHuffDecoder(f *testing.F) {
	r := rand.New(rand.NewPCG(13, 14))
	var s huff0.Scratch
	for _, shape := range []float64{0.3, 2, 30} {
		for _, n := range []int{40, 700, 9000} {
			if coded, _, err := huff0.Compress4X(skewedBlock(r, n, shape), &s); err == nil {
				f.Add(bytes.Clone(coded), n)
			}
		}
	}
	var d huffDecoder
	f.Fuzz(func(t *testing.T, in []byte, n int) {
		if n < 0 || n > blockSize {
			return
		}
		got, err := ourDecode(&d, in, n)
		want, werr := huff0Decode(in, n)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%v, want ErrCorrupt", err)
		}
		if (err == nil) != (werr == nil) || err == nil && !bytes.Equal(got, want) {
			t.Fatalf("huffDecoder %v, huff0 %v (or other bytes)", err, werr)
		}
	})
}

package bytegroup

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// rawPlaneArrays are arrays whose planes the raw shortcuts take or refuse:
// BF16 and F32 weights (low planes close to random), a plane whose
// sampled bytes are random and the rest zero (predicted incompressible,
// in fact compressible), one whose last block alone is compressible, and
// lengths with a short last block and trailing bytes.
func rawPlaneArrays() map[string][]byte {
	r := rand.New(rand.NewPCG(5, 6))
	weights := func(n, width int) []byte {
		b := make([]byte, n*width+1)
		for i := range n {
			w := math.Float32bits(float32(r.NormFloat64() * 0.02))
			if width == 2 {
				binary.LittleEndian.PutUint16(b[2*i:], uint16(w>>16))
			} else {
				binary.LittleEndian.PutUint32(b[4*i:], w)
			}
		}
		return b
	}
	sparse := weights(3*blockSize, 2)
	for i := 0; i < 3*blockSize; i++ {
		if i%16 != 0 {
			sparse[2*i] = 0 // the plane's unsampled bytes
		}
	}
	lastBlock := weights(3*blockSize, 2)
	for i := 2 * blockSize; i < 3*blockSize; i++ {
		lastBlock[2*i] = byte(i % 3)
	}
	return map[string][]byte{
		"bf16":          weights(1<<20, 2),
		"bf16-short":    weights(2*blockSize+100<<10+3, 2),
		"bf16-tinyblk":  weights(2*blockSize+100, 2), // a last block too short to sample
		"f32":           weights(300<<10, 4),
		"sparse-sample": sparse,
		"last-block":    lastBlock,
	}
}

// Generic bytes (one plane) are never taken raw on a sample: zstd finds
// the repeats of a random run that no entropy coder sees.
func TestRawShortcutLeavesGenericBytes(t *testing.T) {
	run := make([]byte, 32<<10)
	r := rand.New(rand.NewPCG(7, 8))
	for i := range run {
		run[i] = byte(r.Uint32())
	}
	a := bytes.Repeat(run, 16)
	if !(&coder{bs: blockSize}).planeRaw(-1, a) {
		t.Fatal("the repeated random run does not sample as incompressible: the test tests nothing")
	}
	enc := Encode(a, 1)
	if len(enc) > len(a)/4 {
		t.Errorf("repeats coded in %d bytes of %d", len(enc), len(a))
	}
	if got, err := Decode(nil, enc, len(a)); err != nil || !bytes.Equal(got, a) {
		t.Errorf("does not decode exactly: %v", err)
	}
}

// The shortcuts write the same bytes as the block-by-block coding (old
// blobs and new ones are one format), take the planes they should, and
// every array decodes exactly, a compressible plane predicted
// incompressible included.
func TestRawPlaneShortcuts(t *testing.T) {
	for name, a := range rawPlaneArrays() {
		width := 2
		if name == "f32" {
			width = 4
		}
		base := append([]byte{}, a...)
		for i := 0; i+width <= len(base); i += 64 * width {
			base[i+width-1] ^= 1 // a delta of a few changed elements
		}
		for _, c := range []struct {
			kind string
			enc  func() []byte
			dec  func([]byte) ([]byte, error)
		}{
			{"grouped", func() []byte { return Encode(a, width) }, func(e []byte) ([]byte, error) { return Decode(nil, e, len(a)) }},
			{"delta", func() []byte { return EncodeDelta(a, base, width) }, func(e []byte) ([]byte, error) { return DecodeDelta(nil, e, len(a), base) }},
		} {
			fast := c.enc()
			rawShortcut = false
			slow := c.enc()
			rawShortcut = true
			if !bytes.Equal(fast, slow) {
				t.Errorf("%s %s: the shortcut's coding (%d bytes) differs from the block-by-block one (%d)", name, c.kind, len(fast), len(slow))
			}
			if got, err := c.dec(fast); err != nil || !bytes.Equal(got, a) {
				t.Errorf("%s %s: does not decode exactly: %v", name, c.kind, err)
			}
		}
		n := len(a) / width
		want := name == "bf16" || name == "bf16-short" || name == "f32" || name == "sparse-sample"
		c := &coder{bs: blockSize}
		planes := c.planesFor(n, width)
		split(a, planes, width)
		if got := c.planeRaw(-1, planes[0]); got != want {
			t.Errorf("%s: plane 0 predicted raw %v, want %v", name, got, want)
		}
		if name == "sparse-sample" {
			// Compressible (mostly zeros), yet kept raw: it costs size,
			// never correctness.
			if enc := Encode(a, width); len(enc) < n {
				t.Errorf("sparse-sample: coded in %d bytes, its raw low plane alone is %d", len(enc), n)
			}
		}
	}
}

// A plane of numbers nearly all one value whose rare others repeat is
// coded by zstd, which codes it far below what Huffman and FSE can: the
// plane is under the bits a byte from which zstd is not tried.
func TestZstdCodesRepeatsOfAPlaneOfNumbers(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	period := make([]byte, 4096)
	for i := range period {
		if r.IntN(40) == 0 {
			period[i] = byte(1 + r.IntN(255))
		}
	}
	plane := bytes.Repeat(period, 2*blockSize/len(period))
	c := &coder{bs: blockSize}
	out := c.appendPlane(nil, plane, -1, false)
	if out[0] != modeZstd {
		t.Fatalf("plane mode %d in %d bytes, want zstd", out[0], len(out))
	}
	got := make([]byte, len(plane))
	if rest, err := c.decodePlane(out, got); err != nil || len(rest) != 0 || !bytes.Equal(got, plane) {
		t.Fatalf("does not decode exactly: %v", err)
	}
}

package bytegroup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// special float bit patterns that round trips must keep bit for bit.
var specials32 = []uint32{
	0x7fc00001, 0xffc12345, 0x7f800001, // NaNs with payloads (quiet, negative, signalling)
	0x7f800000, 0xff800000, // ±Inf
	0x00000001, 0x807fffff, // denormals
	0x80000000, 0, // -0, +0
}

var specials16 = []uint16{0x7fc1, 0xffff, 0x7f81, 0x7f80, 0xff80, 0x0001, 0x807f, 0x8000, 0, 0x7e01}

// genData draws adversarial and ordinary arrays: weights-like floats with
// special values mixed in, all-zero, one repeated byte, incompressible,
// any (odd) length.
func genData(t *rapid.T, label string) []byte {
	n := rapid.IntRange(0, 3*blockSize+7).Draw(t, label+"_len")
	seed := rapid.Uint64().Draw(t, label+"_seed")
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	switch rapid.IntRange(0, 4).Draw(t, label+"_kind") {
	case 0: // all zero
	case 1: // incompressible
		for i := range b {
			b[i] = byte(r.Uint32())
		}
	case 2: // BF16 weights ~N(0, 0.02) with specials
		for i := 0; i+1 < n; i += 2 {
			v := uint16(math.Float32bits(float32(r.NormFloat64()*0.02)) >> 16)
			if r.IntN(50) == 0 {
				v = specials16[r.IntN(len(specials16))]
			}
			binary.LittleEndian.PutUint16(b[i:], v)
		}
	case 3: // F32 weights with specials
		for i := 0; i+3 < n; i += 4 {
			v := math.Float32bits(float32(r.NormFloat64()))
			if r.IntN(50) == 0 {
				v = specials32[r.IntN(len(specials32))]
			}
			binary.LittleEndian.PutUint32(b[i:], v)
		}
	case 4: // one repeated byte
		for i := range b {
			b[i] = 0xab
		}
	}
	return b
}

func TestRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		src := genData(t, "src")
		width := rapid.SampledFrom([]int{1, 2, 4, 8, 3}).Draw(t, "width")
		enc := Encode(src, width)
		got, err := Decode(nil, enc, len(src))
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !bytes.Equal(got, src) {
			t.Fatalf("round trip differs (len %d width %d)", len(src), width)
		}
		// A wrong expected length is refused, never trusted.
		if _, err := Decode(nil, enc, len(src)+1); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decode with a wrong length: %v, want ErrCorrupt", err)
		}
		// Matches takes the bytes, and no others of their length.
		if _, err := Matches(nil, enc, src); err != nil {
			t.Fatalf("matches: %v", err)
		}
		if len(src) > 0 {
			at := rapid.IntRange(0, len(src)-1).Draw(t, "flip")
			other := bytes.Clone(src)
			other[at] ^= byte(rapid.IntRange(1, 255).Draw(t, "bits"))
			if _, err := Matches(nil, enc, other); !errors.Is(err, ErrMismatch) {
				t.Fatalf("matches with byte %d changed: %v, want ErrMismatch", at, err)
			}
		}
	})
}

// A delta against a base (of any length: shorter, equal, longer) XORed,
// coded, decoded and XORed again gives the target back bit for bit.
func TestDeltaRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		target := genData(t, "target")
		base := genData(t, "base")
		if rapid.Bool().Draw(t, "near") && len(base) > 0 {
			// a fine-tune: the base with a few flipped low bits
			base = append([]byte(nil), target...)
			for i := 0; i < len(base); i += 7 {
				base[i] ^= 1
			}
		}
		delta := XOR(nil, target, base)
		width := rapid.SampledFrom([]int{1, 2, 4}).Draw(t, "width")
		enc := EncodeWith(delta, width, base)
		dec, err := DecodeWith(nil, enc, len(target), base)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(nil, enc, len(target)); width > 1 && base != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decoding without the context it was coded with: %v, want ErrCorrupt", err)
		}
		if got := XOR(dec, dec, base); !bytes.Equal(got, target) {
			t.Fatalf("delta round trip differs (target %d base %d)", len(target), len(base))
		}
	})
}

// BF16 weights shrink: the exponent plane codes to well under half.
func TestCompressesBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, 4<<20)
	for i := 0; i < len(src); i += 2 {
		binary.LittleEndian.PutUint16(src[i:], uint16(math.Float32bits(float32(r.NormFloat64()*0.02))>>16))
	}
	enc := Encode(src, 2)
	if ratio := float64(len(enc)) / float64(len(src)); ratio > 0.80 {
		t.Fatalf("BF16 weights coded to %.3f of their size, want <= 0.80", ratio)
	}
	zero := make([]byte, 4<<20)
	if enc := Encode(zero, 2); len(enc) > 4<<10 {
		t.Fatalf("4 MiB of zeros coded to %d bytes", len(enc))
	}
	noise := make([]byte, 1<<20)
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	if enc := Encode(noise, 1); len(enc) > len(noise)+64 {
		t.Fatalf("noise grew by %d bytes", len(enc)-len(noise))
	}
}

// Every truncation and a bit flip at every position of a coded buffer
// either decodes to exactly rawLen bytes or is ErrCorrupt; never a panic.
func TestCorruptIsErrCorrupt(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	src := make([]byte, blockSize+333)
	for i := 0; i+1 < len(src); i += 2 {
		binary.LittleEndian.PutUint16(src[i:], uint16(math.Float32bits(float32(r.NormFloat64()*0.02))>>16))
	}
	// a delta's high bytes: nearly all zero (the FSE block kind)
	skewed := make([]byte, blockSize+100)
	for i := range skewed {
		if r.IntN(20) == 0 {
			skewed[i] = byte(1 + r.IntN(3))
		}
	}
	if enc := Encode(skewed, 1); !bytes.Contains(enc[:16], []byte{modeHuff, kindFSE}) {
		t.Fatalf("a nearly-zero plane is not FSE coded: % x", enc[:16])
	}
	for _, in := range []struct {
		src   []byte
		width int
	}{{src, 1}, {src, 2}, {skewed, 1}} {
		src, width := in.src, in.width
		enc := Encode(src, width)
		for cut := 0; cut < len(enc); cut += 1 + len(enc)/300 {
			if _, err := Decode(nil, enc[:cut], len(src)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("width %d cut at %d: %v, want ErrCorrupt", width, cut, err)
			}
		}
		for i := 0; i < len(enc); i += 1 + len(enc)/500 {
			bad := bytes.Clone(enc)
			bad[i] ^= 0x10
			if got, err := Decode(nil, bad, len(src)); err == nil && len(got) != len(src) {
				t.Fatalf("flip at %d decoded to %d bytes", i, len(got))
			} else if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip at %d: %v, want ErrCorrupt", i, err)
			}
		}
	}
}

// fuzzCtx is a context shorter than most inputs (past its end the key is 0).
var fuzzCtx = bytes.Repeat([]byte{1, 2, 3, 0x3c, 0xbc, 0}, 500)

func FuzzDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, width := range []int{1, 2, 4} {
		src := make([]byte, 5000+width)
		for i := range src {
			src[i] = byte(r.NormFloat64() * 4)
		}
		f.Add(Encode(src, width), len(src), false)
		f.Add(Encode(make([]byte, 3000), width), 3000, false)
		skewed := make([]byte, 4000)
		for i := range skewed {
			if r.IntN(20) == 0 {
				skewed[i] = 1
			}
		}
		f.Add(Encode(skewed, width), len(skewed), false)
		f.Add(EncodeWith(skewed, width, fuzzCtx), len(skewed), true)
	}
	// Planes of huff0 blocks past multiMin: huffDecoder's four-symbol path.
	f.Add(Encode(bf16(40000), 2), 40000, false)
	f.Fuzz(func(t *testing.T, enc []byte, rawLen int, withCtx bool) {
		if rawLen < 0 || rawLen > 1<<18 {
			return // the caller's record bounds it (a chunk is at most 4 MiB)
		}
		var ctx []byte
		if withCtx {
			ctx = fuzzCtx
		}
		out, err := DecodeWith(nil, enc, rawLen, ctx)
		requireDecodedOrCorrupt(t, out, err, rawLen)
	})
}

// requireDecodedOrCorrupt is what a decoder must do with any input: give
// rawLen bytes, or fail with ErrCorrupt.
func requireDecodedOrCorrupt(t *testing.T, out []byte, err error, rawLen int) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error %v is not ErrCorrupt", err)
		}
		return
	}
	if len(out) != rawLen {
		t.Fatalf("decoded %d bytes, want %d", len(out), rawLen)
	}
}

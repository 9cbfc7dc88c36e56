package cast

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"testing"
)

// reference is caster.cast's value-by-value cast of one value.
func reference(from, to string, clamp bool, src []byte) (uint64, bool) {
	return castValue(decodeFloat(src, floatFormats[from]), floatFormats[to], clamp)
}

// checkFast compares the fast cast of src with the reference, value by
// value: the same bits, and false exactly where a value overflows.
func checkFast(t *testing.T, from, to string, clamp bool, src []byte) {
	t.Helper()
	fast := fastCast(from, to, clamp)
	if fast == nil {
		t.Fatalf("no fast cast %s -> %s", from, to)
	}
	fb, tb := floatFormats[from].bytes, floatFormats[to].bytes
	n := len(src) / fb
	dst := make([]byte, n*tb)
	anyOver := false
	for i := range n {
		_, over := reference(from, to, clamp, src[i*fb:])
		anyOver = anyOver || over
	}
	if ok := fast(dst, src); ok == anyOver {
		t.Fatalf("%s -> %s clamp %v: fast cast says ok=%v, the reference overflows: %v", from, to, clamp, ok, anyOver)
	}
	if anyOver {
		// Value by value, to find which.
		one := make([]byte, tb)
		for i := range n {
			want, over := reference(from, to, clamp, src[i*fb:])
			if ok := fast(one, src[i*fb:(i+1)*fb]); ok == over || ok && readBits(one) != want {
				t.Fatalf("%s %#x -> %s clamp %v: fast %#x ok=%v, reference %#x overflow %v", from, readBits(src[i*fb:(i+1)*fb]), to, clamp, readBits(one), ok, want, over)
			}
		}
		return
	}
	for i := range n {
		want, _ := reference(from, to, clamp, src[i*fb:])
		if got := readBits(dst[i*tb : (i+1)*tb]); got != want {
			t.Fatalf("%s %#x -> %s clamp %v: fast %#x, reference %#x", from, readBits(src[i*fb:(i+1)*fb]), to, clamp, got, want)
		}
	}
}

func readBits(b []byte) uint64 {
	switch len(b) {
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	}
	panic("width")
}

// Every 16-bit value, to every target, with and without --clamp; the
// values that overflow one at a time.
func TestFastCastEvery16BitValue(t *testing.T) {
	var all, finite []byte
	for h := range 1 << 16 {
		all = binary.LittleEndian.AppendUint16(all, uint16(h))
	}
	for _, from := range []string{"F16", "BF16"} {
		for _, to := range []string{"F16", "BF16", "F32"} {
			if to == from {
				continue
			}
			for _, clamp := range []bool{false, true} {
				checkFast(t, from, to, clamp, all)
				finite = finite[:0]
				for h := range 1 << 16 { // all that fit: one call, the fast path through
					b := binary.LittleEndian.AppendUint16(nil, uint16(h))
					if _, over := reference(from, to, clamp, b); !over {
						finite = append(finite, b...)
					}
				}
				checkFast(t, from, to, clamp, finite)
			}
		}
	}
}

// F32 values of every sign and exponent, with mantissas at and around
// the rounding points of the 16-bit targets and random ones; with
// MSTORE_CAST_EXHAUSTIVE=1, all 2^32 of them (18 minutes here).
func TestFastCastF32(t *testing.T) {
	var src []byte
	add := func(u uint32) { src = binary.LittleEndian.AppendUint32(src, u) }
	r := rand.New(rand.NewPCG(3, 4))
	for sign := range uint32(2) {
		for exp := range uint32(256) {
			base := sign<<31 | exp<<23
			for _, m := range []uint32{0, 1, 2, 0x7fffff, 0x7ffffe, 0x400000, 0x400001, 0x3fffff} {
				add(base | m)
			}
			// Around the halfway points of F16 (bit 12) and BF16 (bit 15),
			// and of neighbouring bits: just under, at and just over half,
			// the kept part's last bit even and odd (ties go to even).
			for _, low := range []uint32{0x1000, 0x2000, 0x8000, 0x10000} {
				for _, odd := range []uint32{0, 2 * low} {
					for range 4 {
						high := r.Uint32()&0x7fffff&^(4*low-1) | odd
						for _, below := range []uint32{low - 1, low, low + 1} {
							add(base | (high|below)&0x7fffff)
						}
					}
				}
			}
			// F16 subnormals round at other bits: every shift.
			for shift := range uint32(25) {
				half := uint32(1) << shift >> 1
				for _, d := range []uint32{0, 1} {
					add(base | (half+d)&0x7fffff)
					add(base | (3*half-d)&0x7fffff)
				}
			}
			for range 64 {
				add(base | r.Uint32()&0x7fffff)
			}
		}
	}
	add(math.Float32bits(65504))
	add(math.Float32bits(65519.99))
	add(math.Float32bits(65520))
	add(0x7f7f0000)
	add(0x7f7f7fff)
	add(0x7f7f8000)
	for _, to := range []string{"F16", "BF16"} {
		for _, clamp := range []bool{false, true} {
			for i := 0; i < len(src); i += 4 {
				checkFast(t, "F32", to, clamp, src[i:i+4])
			}
		}
	}
	if os.Getenv("MSTORE_CAST_EXHAUSTIVE") == "" {
		return
	}
	for _, to := range []string{"F16", "BF16"} {
		for _, clamp := range []bool{false, true} {
			fast := fastCast("F32", to, clamp)
			var b [4]byte
			one := make([]byte, 2)
			for u := uint64(0); u < 1<<32; u++ {
				binary.LittleEndian.PutUint32(b[:], uint32(u))
				want, over := reference("F32", to, clamp, b[:])
				if ok := fast(one, b[:]); ok == over || ok && uint64(binary.LittleEndian.Uint16(one)) != want {
					t.Fatalf("F32 %#08x -> %s clamp %v: fast %#04x ok=%v, reference %#04x overflow %v", u, to, clamp, binary.LittleEndian.Uint16(one), ok, want, over)
				}
			}
		}
	}
}

// A cast of many values runs in parts on every core: the same bytes as
// one part, and an overflow in the last part is found.
func TestFastCastInParallel(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4)) // parts, whatever the machine
	r := rand.New(rand.NewPCG(5, 6))
	n := 3*parallelValues + 7
	src := make([]byte, 2*n)
	for i := range n {
		binary.LittleEndian.PutUint16(src[2*i:], uint16(r.Uint32())&0x3fff) // finite BF16 values F16 holds... mostly
	}
	for _, c := range []struct{ from, to string }{{"BF16", "F32"}, {"F16", "BF16"}} {
		each := tableOf(c.from, c.to, true).cast
		tb := floatFormats[c.to].bytes
		want, got := make([]byte, n*tb), make([]byte, n*tb)
		if !each(want, src) || !fastCast(c.from, c.to, true)(got, src) || !bytes.Equal(got, want) {
			t.Fatalf("%s -> %s: the parallel cast differs from one part's", c.from, c.to)
		}
	}
	huge := slices.Clone(src)
	binary.LittleEndian.PutUint16(huge[len(huge)-2:], 0x7f00) // BF16 1.7e38: beyond F16
	if fastCast("BF16", "F16", false)(make([]byte, 2*n), huge) {
		t.Fatal("an overflow in the last part was not reported")
	}
	if !fastCast("BF16", "F16", true)(make([]byte, 2*n), huge) {
		t.Fatal("with --clamp nothing overflows")
	}
}

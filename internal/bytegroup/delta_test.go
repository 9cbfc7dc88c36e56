package bytegroup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"pgregory.net/rapid"
)

// nearBase draws a base for target: unrelated, or target with small
// changes of value (steps of the mantissa, across zero and into the
// special values too), or target itself.
func nearBase(t *rapid.T, target []byte) []byte {
	switch rapid.IntRange(0, 3).Draw(t, "base_kind") {
	case 0:
		return genData(t, "base")
	case 1:
		return bytes.Clone(target)
	}
	base := bytes.Clone(target)
	cut := rapid.IntRange(0, len(base)).Draw(t, "base_len") // shorter than the target, or as long
	base = base[:cut]
	r := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "step_seed"), 2))
	for i := 0; i+1 < len(base); i += 2 {
		v := binary.LittleEndian.Uint16(base[i:]) + uint16(r.IntN(9)-4)
		if r.IntN(40) == 0 {
			v = specials16[r.IntN(len(specials16))]
		}
		binary.LittleEndian.PutUint16(base[i:], v)
	}
	return base
}

// Every delta, by either transform, decodes to its target bit for bit,
// whatever the target and base (any length, any bits, a base shorter or
// longer or empty), and refuses a wrong length.
func TestDifferenceDeltaRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		target := genData(t, "target")
		base := nearBase(t, target)
		width := rapid.SampledFrom([]int{1, 2, 4, 8, 3}).Draw(t, "width")
		for name, enc := range map[string][]byte{
			"smaller": EncodeDelta(target, base, width),
			"xor":     EncodeWith(XOR(nil, target, base), max(width&6, 1), base),
		} {
			got, err := DecodeDelta(nil, enc, len(target), base)
			if err != nil || !bytes.Equal(got, target) {
				t.Fatalf("%s: round trip differs (target %d base %d width %d): %v", name, len(target), len(base), width, err)
			}
			if _, err := DecodeDelta(nil, enc, len(target)+1, base); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: a wrong length: %v, want ErrCorrupt", name, err)
			}
		}
		if width == 2 || width == 4 {
			enc := encode(nil, target, width, base, byDifference)
			got, err := DecodeDelta(nil, enc, len(target), base)
			if err != nil || !bytes.Equal(got, target) {
				t.Fatalf("difference: round trip differs (target %d base %d width %d): %v", len(target), len(base), width, err)
			}
			if _, err := DecodeWith(nil, enc, len(target), base); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("a difference delta read as a plain one: %v, want ErrCorrupt", err)
			}
		}
	})
}

// The order maps are bijections that sort finite floats as their values.
func TestOrderIsAMonotoneBijection(t *testing.T) {
	prevF := float32(math.Inf(-1))
	seen := make([]bool, 1<<16)
	for u := range 1 << 16 {
		o := order16(uint16(u))
		if seen[o] || unorder16(o) != uint16(u) {
			t.Fatalf("order16(%#04x) = %#04x is not a bijection", u, o)
		}
		seen[o] = true
	}
	for o := range 1 << 16 {
		f := math.Float32frombits(uint32(unorder16(uint16(o))) << 16)
		if math.IsNaN(float64(f)) {
			continue
		}
		if f < prevF {
			t.Fatalf("order %#04x is %v, after %v", o, f, prevF)
		}
		prevF = f
	}
	r := rand.New(rand.NewPCG(1, 1))
	for _, u := range append(specials32, r.Uint32(), r.Uint32(), r.Uint32(), 0xffffffff, 0x7fffffff) {
		if unorder32(order32(u)) != u {
			t.Fatalf("order32(%#08x) does not invert", u)
		}
	}
}

// A chunk past the sampling length, of odd length, against a base that
// stops in the middle of its sample and of its last element: the
// transform picked on the sample decodes the whole.
func TestDeltaLongChunkShortBase(t *testing.T) {
	base, ft := lora(sampleMin + 3)
	for _, b := range [][]byte{base, base[:sampleMin/2+1]} {
		for _, width := range []int{2, 4} {
			enc := EncodeDelta(ft, b, width)
			got, err := DecodeDelta(nil, enc, len(ft), b)
			if err != nil || !bytes.Equal(got, ft) {
				t.Fatalf("base %d width %d: %v", len(b), width, err)
			}
		}
	}
}

// On a merged LoRA's BF16 delta the difference codes smaller than XOR,
// under 0.41 of the raw bytes, and EncodeDelta picks it.
func TestDifferenceBeatsXOROnFineTunes(t *testing.T) {
	base, ft := lora(sampleMin)
	byXOR := len(EncodeWith(XOR(nil, ft, base), 2, base))
	byDiff := len(encode(nil, ft, 2, base, byDifference))
	got := EncodeDelta(ft, base, 2)
	t.Logf("XOR %.4f, difference %.4f", float64(byXOR)/float64(len(ft)), float64(byDiff)/float64(len(ft)))
	if byDiff >= byXOR || float64(byDiff) > 0.41*float64(len(ft)) || len(got) != byDiff {
		t.Fatalf("difference %d, XOR %d, picked %d of %d bytes", byDiff, byXOR, len(got), len(ft))
	}
}

// FuzzDecodeDelta: no coded input may panic or decode to another length;
// every failure is ErrCorrupt. rawLen is bounded as the store's record
// bounds it, so memory is too.
func FuzzDecodeDelta(f *testing.F) {
	base, ft := lora(6000)
	for _, width := range []int{1, 2, 4} {
		f.Add(EncodeDelta(ft, base, width), len(ft), true)
		f.Add(encode(nil, ft, 2, base, byDifference), len(ft), true)
		f.Add(EncodeDelta(ft[:777], nil, width), 777, false)
	}
	f.Fuzz(func(t *testing.T, enc []byte, rawLen int, withBase bool) {
		if rawLen < 0 || rawLen > 1<<18 {
			return
		}
		var b []byte
		if withBase {
			b = base
		}
		out, err := DecodeDelta(nil, enc, rawLen, b)
		requireDecodedOrCorrupt(t, out, err, rawLen)
	})
}

// order (the permutation of a context-ordered coding) is a stable sort of
// the elements by their context key, for every width, both keys, and a
// context shorter or longer than the array or of an odd length: the fast
// path of width 2 included, so that it can never drift from the format.
func TestOrderIsAStableSortByKey(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		width := []int{2, 4, 8}[trial%3]
		n := r.IntN(300)
		ctx := make([]byte, r.IntN(n*width+width+3))
		for i := range ctx {
			ctx[i] = byte(r.Uint32())
		}
		for _, exponent := range []bool{false, true} {
			key := func(i int) byte {
				var e [8]byte
				copy(e[:width], ctx[min(i*width, len(ctx)):])
				if exponent {
					return byte((uint16(e[width-1])<<8 | uint16(e[width-2])) >> 7)
				}
				return e[width-1]
			}
			idx := make([]int, n)
			for i := range idx {
				idx[i] = i
			}
			sort.SliceStable(idx, func(a, b int) bool { return key(idx[a]) < key(idx[b]) })
			var c coder
			got := c.order(ctx, n, width, exponent)
			for place, i := range idx {
				if got[i] != int32(place) {
					t.Fatalf("width %d, n %d, ctx %d bytes, exponent %v: element %d at %d, want %d", width, n, len(ctx), exponent, i, got[i], place)
				}
			}
		}
	}
}

// GroupedMayBeat says no only when a sample from the middle of a long
// array codes no smaller than the size to beat, and yes for short arrays.
func TestGroupedMayBeat(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	weights := make([]byte, 2*sampleMin)
	for j := 0; j+1 < len(weights); j += 2 {
		binary.LittleEndian.PutUint16(weights[j:], uint16(math.Float32bits(float32(r.NormFloat64()*0.02))>>16))
	}
	grouped := len(Encode(weights, 2))
	for _, c := range []struct {
		raw  []byte
		size int
		want bool
	}{
		{weights, len(weights), true},      // raw: grouped beats it
		{weights, grouped * 11 / 10, true}, // 10% above what grouped makes
		{weights, grouped * 9 / 10, false}, // 10% under: grouped cannot
		{weights[:sampleMin-2], 1, true},   // short: always coded whole
	} {
		if got := GroupedMayBeat(c.raw, 2, c.size); got != c.want {
			t.Errorf("%d bytes against %d (grouped %d): %v, want %v", len(c.raw), c.size, grouped, got, c.want)
		}
	}
}

// The one-pass split and join (a base covering every element, widths 2
// and 4) lay the planes out exactly as the transform, order's permutation
// and splitPermuted do, and joinKeyed inverts them, for any bytes.
func TestOnePassIsThePermutedPath(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		width := rapid.SampledFrom([]int{2, 4}).Draw(t, "width")
		src := genData(t, "src")
		ctx := nearBase(t, src)
		ctx = append(ctx, genData(t, "ctx_tail")...) // as long as src, or longer
		for len(ctx) < len(src) {
			ctx = append(ctx, byte(len(ctx)*7))
		}
		n := len(src) / width
		for _, tr := range []transform{byXOR, byDifference} {
			var c coder
			want := make([][]byte, width)
			got := make([][]byte, width)
			for p := range want {
				want[p], got[p] = make([]byte, n), make([]byte, n)
			}
			splitPermuted(transformWhole(nil, src, ctx, width, tr, false), want, width, c.order(ctx, n, width, tr == byDifference))
			splitKeyed(src, ctx, got, width, tr)
			for p := range want {
				if !bytes.Equal(got[p], want[p]) {
					t.Fatalf("transform %d width %d n %d: plane %d differs", tr, width, n, p)
				}
			}
			back := make([]byte, n*width)
			joinKeyed(back, ctx, got, width, tr)
			if !bytes.Equal(back, src[:n*width]) {
				t.Fatalf("transform %d width %d n %d: joinKeyed does not invert", tr, width, n)
			}
		}
	})
}

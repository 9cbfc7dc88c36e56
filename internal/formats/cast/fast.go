package cast

import (
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
)

// The fast casts give, bit for bit, what caster.cast's value-by-value
// cast through float64 gives (decodeFloat, the clamp, encodeFloat), at
// memory speed: that took 6.9 s for a 300 MB model's --dtype bf16, cp
// 0.24 s. A fast cast returns false where a value overflows; the
// reference cast then runs to report it. fast_test.go checks every 16-bit
// input and F32 inputs of every exponent against the reference.

// fastCast is the fast cast from one dtype to another, or nil.
func fastCast(from, to string, clamp bool) func(dst, src []byte) bool {
	var each func(dst, src []byte) bool
	switch {
	case floatFormats[from].bytes == 2:
		t := tableOf(from, to, clamp)
		each = t.cast
	case from == "F32" && to == "BF16":
		each = func(dst, src []byte) bool { return f32ToHalf(dst, src, clamp, f32ToBF16) }
	case from == "F32" && to == "F16":
		each = func(dst, src []byte) bool { return f32ToHalf(dst, src, clamp, f32ToF16) }
	default:
		return nil
	}
	fb, tb := floatFormats[from].bytes, floatFormats[to].bytes
	return func(dst, src []byte) bool { return inParallel(dst, src, fb, tb, each) }
}

// parallelValues is the number of values from which a cast is cut into
// parts cast on every core at once: a model's embedding is one tensor of
// tens of millions.
const parallelValues = 1 << 20

// inParallel casts the values of src (fb bytes each) into dst (tb each)
// with each, in parts on every core when there are many; false if a part
// overflowed.
func inParallel(dst, src []byte, fb, tb int, each func(dst, src []byte) bool) bool {
	n := len(src) / fb
	parts := min(runtime.GOMAXPROCS(0), n/parallelValues)
	if parts <= 1 {
		return each(dst, src)
	}
	var failed atomic.Bool
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := n*p/parts, n*(p+1)/parts
		wg.Go(func() {
			if !each(dst[lo*tb:hi*tb], src[lo*fb:hi*fb]) {
				failed.Store(true)
			}
		})
	}
	wg.Wait()
	return !failed.Load()
}

// castTable holds the cast of every value of a 16-bit dtype, made by the
// reference cast: to a 16-bit dtype in b16 with the values that overflow
// marked in over, to F32 in b32 (which every 16-bit float fits). Small
// enough to stay in a core's cache (128 or 256 KiB): with a table of
// 64-bit entries (512 KiB) a checkout --dtype f32 took a third more CPU.
type castTable struct {
	to   int // bytes
	b16  *[1 << 16]uint16
	over *[1 << 10]uint64 // a bit per value
	b32  *[1 << 16]uint32
}

var tables = struct {
	sync.Mutex
	m map[[3]string]*castTable
}{m: map[[3]string]*castTable{}}

// tableOf returns the cast table from a 16-bit dtype (made once: 65,536
// reference casts, about 3 ms).
func tableOf(from, to string, clamp bool) *castTable {
	key := [3]string{from, to, ""}
	if clamp {
		key[2] = "clamp"
	}
	tables.Lock()
	defer tables.Unlock()
	if t := tables.m[key]; t != nil {
		return t
	}
	f, g := floatFormats[from], floatFormats[to]
	t := &castTable{to: g.bytes}
	switch g.bytes {
	case 2:
		t.b16, t.over = new([1 << 16]uint16), new([1 << 10]uint64)
	case 4:
		t.b32 = new([1 << 16]uint32)
	}
	var b [2]byte
	for h := range 1 << 16 {
		binary.LittleEndian.PutUint16(b[:], uint16(h))
		bits, over := castValue(decodeFloat(b[:], f), g, clamp)
		switch {
		case t.b16 != nil:
			t.b16[h] = uint16(bits)
			if over {
				t.over[h>>6] |= 1 << (h & 63)
			}
		case t.b32 != nil && !over:
			t.b32[h] = uint32(bits)
		default:
			t.to = 0 // no fast cast (never: a 16-bit float fits an F32)
		}
	}
	tables.m[key] = t
	return t
}

func (t *castTable) cast(dst, src []byte) bool {
	n := len(src) / 2
	src = src[:2*n]
	switch t.to {
	case 2:
		dst = dst[:2*n]
		for i := 0; i+1 < len(src) && i+1 < len(dst); i += 2 {
			h := uint16(src[i]) | uint16(src[i+1])<<8
			if t.over[h>>6]&(1<<(h&63)) != 0 {
				return false
			}
			v := t.b16[h]
			dst[i], dst[i+1] = byte(v), byte(v>>8)
		}
	case 4:
		dst = dst[:4*n]
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(dst[4*i:], t.b32[uint16(src[2*i])|uint16(src[2*i+1])<<8])
		}
	default:
		return false
	}
	return true
}

// f32ToHalf casts F32 values to a 16-bit dtype with to.
func f32ToHalf(dst, src []byte, clamp bool, to func(u uint32, clamp bool) (uint16, bool)) bool {
	n := len(src) / 4
	src, dst = src[:4*n], dst[:2*n]
	for i := 0; i < n; i++ {
		h, over := to(binary.LittleEndian.Uint32(src[4*i:]), clamp)
		if over {
			return false
		}
		binary.LittleEndian.PutUint16(dst[2*i:], h)
	}
	return true
}

// f32ToBF16 rounds the F32 u to BF16, to nearest with ties to even.
func f32ToBF16(u uint32, clamp bool) (uint16, bool) {
	sign := uint16(u>>16) & 0x8000
	switch abs := u & 0x7fffffff; {
	case abs > 0x7f800000: // NaN: quiet, the top of its payload
		return sign | 0x7fc0 | uint16(u>>16)&0x7f, false
	case abs == 0x7f800000:
		return sign | 0x7f80, false
	case clamp && abs > 0x7f7f0000: // beyond BF16's largest finite value
		return sign | 0x7f7f, false
	}
	h := uint16((u + 0x7fff + (u>>16)&1) >> 16)
	return h, h&0x7fff == 0x7f80
}

// f32ToF16 rounds the F32 u to F16, to nearest with ties to even, with
// subnormals.
func f32ToF16(u uint32, clamp bool) (uint16, bool) {
	sign := uint16(u>>16) & 0x8000
	abs := u & 0x7fffffff
	man := abs & 0x7fffff
	switch {
	case abs > 0x7f800000: // NaN: quiet, the top of its payload
		return sign | 0x7e00 | uint16(man>>13), false
	case abs == 0x7f800000:
		return sign | 0x7c00, false
	case clamp && abs > 0x477fe000: // beyond 65504
		return sign | 0x7bff, false
	}
	e := int(abs>>23) - 127 + 15 // the F16 biased exponent
	if e >= 0x1f {
		return sign | 0x7c00, true
	}
	if e <= 0 { // an F16 subnormal, or zero: a multiple of 2^-24
		if e < -10 {
			return sign, false // under 2^-25
		}
		m := man | 0x800000
		shift := uint(14 - e)
		q, r, half := m>>shift, m&(1<<shift-1), uint32(1)<<(shift-1)
		if r > half || r == half && q&1 == 1 {
			q++ // 0x400, the smallest normal, is encoded right
		}
		return sign | uint16(q), false
	}
	q := uint32(e)<<10 | man>>13
	if r := man & 0x1fff; r > 0x1000 || r == 0x1000 && q&1 == 1 {
		q++ // a carry moves into the exponent, as it should
	}
	if q >= 0x7c00 {
		return sign | 0x7c00, true
	}
	return sign | uint16(q), false
}

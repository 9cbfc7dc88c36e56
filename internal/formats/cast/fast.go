package cast

import (
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
)

// The fast casts give, bit for bit, what castTransform's value-by-value
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
// reference cast: the value's bits, with overBit set where it overflows.
type castTable struct {
	to   int // bytes
	bits *[1 << 16]uint64
}

const overBit = 1 << 32

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
	t := &castTable{to: g.bytes, bits: new([1 << 16]uint64)}
	var b [2]byte
	for h := range 1 << 16 {
		binary.LittleEndian.PutUint16(b[:], uint16(h))
		bits, over := castValue(decodeFloat(b[:], f), g, clamp)
		t.bits[h] = bits
		if over {
			t.bits[h] |= overBit
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
			v := t.bits[uint16(src[i])|uint16(src[i+1])<<8]
			if v >= overBit {
				return false
			}
			dst[i], dst[i+1] = byte(v), byte(v>>8)
		}
	case 4:
		dst = dst[:4*n]
		for i := 0; i < n; i++ {
			v := t.bits[uint16(src[2*i])|uint16(src[2*i+1])<<8]
			if v >= overBit { // never: a 16-bit float fits an F32
				return false
			}
			binary.LittleEndian.PutUint32(dst[4*i:], uint32(v))
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

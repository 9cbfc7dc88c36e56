package bytegroup

import (
	"encoding/binary"
	"fmt"
)

// Deltas of a fine-tuned array against its base (same dtype, same
// offset), in one of two transforms, the smaller kept:
//
//   - XOR (header version 2): a XOR base, planes ordered by the top byte
//     of the base's element. What a change leaves of the bits.
//   - difference (header version 3, widths 2 and 4): each element's bits,
//     mapped to an integer that grows with the float's value (the sign
//     bit set: all bits flipped; else the sign bit set), minus the base's
//     so mapped, zigzag coded (0, -1, 1, -2, … → 0, 1, 2, 3, …): a small
//     change in value is a small number of steps of the mantissa, which
//     XOR scatters over every bit a carry crosses. Planes are ordered by
//     the base element's exponent (permute), since the size of one step,
//     and so the number of steps a change takes, depends on it. Elements
//     past the base's end are taken against zero bits; the raw length mod
//     width trailing bytes are kept as they are.
//
// Both are lossless for any bytes (NaN payloads, infinities, −0 and
// integers included: the mapping is a bijection of the bit patterns).

// sampleMin is the length from which EncodeDelta picks the transform on a
// sample of the array instead of coding it whole both ways.
const sampleMin = 1 << 20

// sampleLen is the sample's length: a few huff0 blocks of each plane.
const sampleLen = 128 << 10

// EncodeDelta codes raw as a delta against base (the raw bytes of an array
// of the same dtype; shorter, longer or empty) in width planes, by the
// transform that codes smaller; DecodeDelta is its inverse.
func EncodeDelta(raw, base []byte, width int) []byte {
	return AppendDelta(nil, raw, base, width)
}

// AppendDelta is EncodeDelta appending to dst, which the caller may reuse
// once it is done with the result.
func AppendDelta(dst, raw, base []byte, width int) []byte {
	if !validWidth(width) {
		width = 1
	}
	if width == 1 {
		return encode(dst, XOR(nil, raw, base), 1, nil, asIs)
	}
	if width != 2 && width != 4 {
		return encode(dst, raw, width, base, byXOR)
	}
	if len(raw) >= sampleMin {
		// The transform that wins on a sample from the middle wins on the
		// whole: a chunk of one tensor is of one kind throughout.
		if pickOnSample(raw, base, width) == byDifference {
			return encode(dst, raw, width, base, byDifference)
		}
		return encode(dst, raw, width, base, byXOR)
	}
	byDiff := encode(nil, raw, width, base, byDifference)
	if byXOR := encode(dst, raw, width, base, byXOR); len(byXOR) <= len(byDiff) {
		return byXOR
	}
	return append(dst, byDiff...)
}

// pickOnSample returns the transform that codes a sample from the middle
// of raw smaller.
func pickOnSample(raw, base []byte, width int) transform {
	c := coders.Get().(*coder)
	defer coders.Put(c)
	at := (len(raw)/2 - sampleLen/2) &^ 7
	s, sb := raw[at:at+sampleLen], base[min(at, len(base)):min(at+sampleLen, len(base))]
	c.sample = encode(c.sample[:0], s, width, sb, byXOR)
	x := len(c.sample)
	if c.sample = encode(c.sample[:0], s, width, sb, byDifference); len(c.sample) < x {
		return byDifference
	}
	return byXOR
}

// GroupedMayBeat reports whether Encode(raw, width) may code raw in fewer
// than size bytes. An array of sampleMin bytes or more is judged on a
// sample from its middle, as EncodeDelta picks its transform: a chunk of
// one tensor is of one kind throughout, so a grouped coding whose sample
// codes no smaller than size a byte of raw does not pay coding whole (a
// fine-tune's delta that does not reach the early-out ratio would
// otherwise cost a second whole coding to lose).
func GroupedMayBeat(raw []byte, width int, size int) bool {
	if len(raw) < sampleMin {
		return true
	}
	at := (len(raw)/2 - sampleLen/2) &^ 7
	s := len(Encode(raw[at:at+sampleLen], width))
	// 1% of slack for the sample's own header and its blocks' tables.
	return float64(s)*0.99*float64(len(raw)) < float64(size)*float64(sampleLen)
}

// DecodeDelta decodes enc, a delta EncodeDelta coded against base, into
// dst (grown as needed): rawLen bytes, or ErrCorrupt.
func DecodeDelta(dst, enc []byte, rawLen int, base []byte) ([]byte, error) {
	if len(enc) >= 5 && [4]byte(enc[:4]) == magicSub {
		if w := int(enc[4]); w != 2 && w != 4 {
			return nil, fmt.Errorf("%w: a difference delta of width %d", ErrCorrupt, w)
		}
		return decode(dst, enc, rawLen, base, byDifference)
	}
	return decode(dst, enc, rawLen, base, byXOR)
}

// difference sets dst (len(a) bytes; it may be a) to the zigzag
// difference of a's elements and base's, or, inverse, a holding such
// differences, to the elements again.
func difference(dst, a, base []byte, width int, inverse bool) []byte {
	dst = grow(dst, len(a))
	n := len(a) / width
	whole := min(n, len(base)/width)
	switch w := whole * width; {
	case width == 2 && inverse:
		d, a, b := dst[:w], a[:w], base[:w]
		for i := 0; i+1 < len(d) && i+1 < len(a) && i+1 < len(b); i += 2 {
			z := uint16(a[i]) | uint16(a[i+1])<<8
			v := unorder16(order16(uint16(b[i])|uint16(b[i+1])<<8) + (z>>1 ^ -(z & 1)))
			d[i], d[i+1] = byte(v), byte(v>>8)
		}
	case width == 2:
		d, a, b := dst[:w], a[:w], base[:w]
		for i := 0; i+1 < len(d) && i+1 < len(a) && i+1 < len(b); i += 2 {
			x := int16(order16(uint16(a[i])|uint16(a[i+1])<<8) - order16(uint16(b[i])|uint16(b[i+1])<<8))
			z := uint16(x<<1) ^ uint16(x>>15)
			d[i], d[i+1] = byte(z), byte(z>>8)
		}
	case width == 4:
		for i := range whole {
			b := order32(binary.LittleEndian.Uint32(base[4*i:]))
			binary.LittleEndian.PutUint32(dst[4*i:], diff32(binary.LittleEndian.Uint32(a[4*i:]), b, inverse))
		}
	}
	for i := whole; i < n; i++ {
		var e [4]byte // the base's element past its end: zero bits
		copy(e[:width], base[min(i*width, len(base)):])
		if width == 2 {
			binary.LittleEndian.PutUint16(dst[2*i:], diff16(binary.LittleEndian.Uint16(a[2*i:]), order16(binary.LittleEndian.Uint16(e[:])), inverse))
		} else {
			binary.LittleEndian.PutUint32(dst[4*i:], diff32(binary.LittleEndian.Uint32(a[4*i:]), order32(binary.LittleEndian.Uint32(e[:])), inverse))
		}
	}
	copy(dst[n*width:], a[n*width:])
	return dst
}

// order16 maps a float's bits to an integer that orders as the floats do.
func order16(u uint16) uint16 { return u ^ (uint16(int16(u)>>15) | 0x8000) }

// unorder16 is order16's inverse.
func unorder16(o uint16) uint16 { return o ^ (^uint16(int16(o)>>15) | 0x8000) }

func order32(u uint32) uint32   { return u ^ (uint32(int32(u)>>31) | 0x80000000) }
func unorder32(o uint32) uint32 { return o ^ (^uint32(int32(o)>>31) | 0x80000000) }

// diff16 is zigzag(order16(a) − ob), or, inverse, the element whose
// difference a is.
func diff16(a, ob uint16, inverse bool) uint16 {
	if inverse {
		d := a>>1 ^ -(a & 1)
		return unorder16(ob + d)
	}
	d := int16(order16(a) - ob)
	return uint16(d<<1) ^ uint16(d>>15)
}

func diff32(a, ob uint32, inverse bool) uint32 {
	if inverse {
		d := a>>1 ^ -(a & 1)
		return unorder32(ob + d)
	}
	d := int32(order32(a) - ob)
	return uint32(d<<1) ^ uint32(d>>31)
}

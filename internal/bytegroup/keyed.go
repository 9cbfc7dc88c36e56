package bytegroup

import "encoding/binary"

// A delta's planes hold its elements in the order of a stable counting
// sort on a key of the context's element (order). Where the context
// covers every whole element and the width is 2 or 4, the coder and the
// decoder walk the elements in their own order with one cursor per key
// (cursors), so that the transform, the sort and the split (or the join)
// are one pass and no permutation is held in memory: computing it was a
// third of a delta's decode, and transform, permutation and split each
// went over the chunk again.

// transform is what a coding with a context holds of each element.
type transform byte

const (
	asIs         transform = iota + 1 // the element; its context only orders it (header 2)
	byXOR                             // element XOR the context's (header 2, DecodeDelta)
	byDifference                      // the zigzag difference (header 3)
)

// keyedFits reports whether the one-pass split and join apply.
func keyedFits(n, width int, ctx []byte, t transform) bool {
	return (width == 2 || width == 4) && t != asIs && len(ctx) >= n*width
}

// cursors returns, for each key, the place of the first element with it
// in a stable counting sort of ctx's n elements by key (they are all
// whole). The key is the top byte for an XOR, the exponent for a
// difference, as in order.
func cursors(ctx []byte, n, width int, t transform) *[256]int32 {
	// Four tables: an increment waits for the one before it of the same
	// key (most are), and four chains of them run side by side.
	var count [4][256]int32
	// The key's two bytes, as a uint16 (lo, hi) shifted right by 7 (the
	// exponent) or 8 (the top byte).
	shift := 8
	if t == byDifference {
		shift = 7
	}
	var c []byte // element e's key bytes at width·e
	if n > 0 {
		c = ctx[width-2 : width*n]
	}
	i := 0
	if width == 2 { // four keys a load
		for ; i+8 <= len(c); i += 8 {
			x := binary.LittleEndian.Uint64(c[i:])
			count[0][byte(x>>shift)]++
			count[1][byte(x>>(16+shift))]++
			count[2][byte(x>>(32+shift))]++
			count[3][byte(x>>(48+shift))]++
		}
	}
	for ; i+4*width <= len(c)+width-2; i += 4 * width {
		count[0][byte(binary.LittleEndian.Uint16(c[i:])>>shift)]++
		count[1][byte(binary.LittleEndian.Uint16(c[i+width:])>>shift)]++
		count[2][byte(binary.LittleEndian.Uint16(c[i+2*width:])>>shift)]++
		count[3][byte(binary.LittleEndian.Uint16(c[i+3*width:])>>shift)]++
	}
	for ; i+1 < len(c); i += width {
		count[0][byte(binary.LittleEndian.Uint16(c[i:])>>shift)]++
	}
	cur := new([256]int32)
	sum := int32(0)
	for k := range 256 {
		cur[k] = sum
		sum += count[0][k] + count[1][k] + count[2][k] + count[3][k]
	}
	return cur
}

// splitKeyed writes the transform of src's n = len(planes[0]) whole
// elements against ctx's into the planes, each at its key's cursor:
// transform(src) then splitPermuted with order's permutation, in one pass.
func splitKeyed(src, ctx []byte, planes [][]byte, width int, t transform) {
	n := len(planes[0])
	cur := cursors(ctx, n, width, t)
	diff := t == byDifference
	if width == 2 {
		p0, p1 := planes[0][:n], planes[1][:n]
		src, ctx := src[:2*n], ctx[:2*n]
		for i := 0; i+1 < len(src) && i+1 < len(ctx); i += 2 {
			a, b := uint16(src[i])|uint16(src[i+1])<<8, uint16(ctx[i])|uint16(ctx[i+1])<<8
			z, k := a^b, byte(b>>8)
			if diff {
				d := int16(order16(a) - order16(b))
				z, k = uint16(d<<1)^uint16(d>>15), byte(b>>7)
			}
			j := cur[k]
			cur[k] = j + 1
			p0[j], p1[j] = byte(z), byte(z>>8)
		}
		return
	}
	p0, p1, p2, p3 := planes[0][:n], planes[1][:n], planes[2][:n], planes[3][:n]
	for e := range n {
		a, b := binary.LittleEndian.Uint32(src[4*e:]), binary.LittleEndian.Uint32(ctx[4*e:])
		z, k := a^b, byte(b>>24)
		if diff {
			d := int32(order32(a) - order32(b))
			z, k = uint32(d<<1)^uint32(d>>31), byte(b>>23)
		}
		j := cur[k]
		cur[k] = j + 1
		p0[j], p1[j], p2[j], p3[j] = byte(z), byte(z>>8), byte(z>>16), byte(z>>24)
	}
}

// joinKeyed is splitKeyed's inverse: it writes dst's whole elements from
// the planes and ctx.
func joinKeyed(dst, ctx []byte, planes [][]byte, width int, t transform) {
	n := len(planes[0])
	cur := cursors(ctx, n, width, t)
	diff := t == byDifference
	if width == 2 {
		p0, p1 := planes[0][:n], planes[1][:n]
		dst, ctx := dst[:2*n], ctx[:2*n]
		for i := 0; i+1 < len(dst) && i+1 < len(ctx); i += 2 {
			b := uint16(ctx[i]) | uint16(ctx[i+1])<<8
			k := byte(b >> 8)
			if diff {
				k = byte(b >> 7)
			}
			j := cur[k]
			cur[k] = j + 1
			z := uint16(p0[j]) | uint16(p1[j])<<8
			v := z ^ b
			if diff {
				v = unorder16(order16(b) + (z>>1 ^ -(z & 1)))
			}
			dst[i], dst[i+1] = byte(v), byte(v>>8)
		}
		return
	}
	p0, p1, p2, p3 := planes[0][:n], planes[1][:n], planes[2][:n], planes[3][:n]
	for e := range n {
		b := binary.LittleEndian.Uint32(ctx[4*e:])
		k := byte(b >> 24)
		if diff {
			k = byte(b >> 23)
		}
		j := cur[k]
		cur[k] = j + 1
		z := uint32(p0[j]) | uint32(p1[j])<<8 | uint32(p2[j])<<16 | uint32(p3[j])<<24
		v := z ^ b
		if diff {
			v = unorder32(order32(b) + (z>>1 ^ -(z & 1)))
		}
		binary.LittleEndian.PutUint32(dst[4*e:], v)
	}
}

// transformTail applies t to tail, the bytes of an array past its whole
// elements (from on), as the transform of the whole array does: an XOR
// covers them where ctx does, a difference keeps them as they are.
func transformTail(tail, ctx []byte, from int, t transform) {
	if t == byXOR && from < len(ctx) {
		XOR(tail, tail, ctx[from:])
	}
}

// transformWhole applies t to all of dst against ctx (inverse: decoding),
// for the path that orders by a permutation.
func transformWhole(dst, src, ctx []byte, width int, t transform, inverse bool) []byte {
	switch t {
	case byXOR:
		return XOR(dst, src, ctx)
	case byDifference:
		return difference(dst, src, ctx, width, inverse)
	}
	return src
}

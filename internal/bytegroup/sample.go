package bytegroup

import (
	"encoding/binary"
	"math"
)

// oneValue reports whether every byte of blk (not empty) is blk[0].
func oneValue(blk []byte) bool {
	w := uint64(blk[0]) * 0x0101010101010101
	i := 0
	for ; i+8 <= len(blk); i += 8 {
		if binary.LittleEndian.Uint64(blk[i:]) != w {
			return false
		}
	}
	for ; i < len(blk); i++ {
		if blk[i] != blk[0] {
			return false
		}
	}
	return true
}

// fseShare is the share of its most frequent byte above which a block is
// coded with FSE alone: Huffman spends at least a bit a byte, FSE about
// the entropy, which is then well under one bit; below, Huffman alone
// (FSE would gain a few percent at half the speed).
const fseShare = 0.75

// sampled estimates, from every 16th byte, blk's entropy in bits a byte
// (over 7.85: no entropy coder can shrink it by more than 2%) and the
// share of its most frequent byte. A block under 16 KiB is not sampled
// (0, 0: every coder is tried).
func sampled(blk []byte) (entropy, top float64) {
	if len(blk) < 16<<10 {
		return 0, 0
	}
	var h [256]int
	n := 0
	for i := 0; i < len(blk); i += 16 {
		h[blk[i]]++
		n++
	}
	return entropyOf(&h, n)
}

// rawEntropy is the sampled entropy over which a block is kept raw.
const rawEntropy = 7.85

// rawShortcut is off only in tests, which compare the shortcuts' bytes
// with the block-by-block coding's.
var rawShortcut = true

// planeRaw reports whether every block of plane p (of c.bs bytes, the
// last shorter) samples over rawEntropy, so that appendPlane would keep
// each block raw and then the plane.
func (c *coder) planeRaw(p int, plane []byte) bool {
	if len(plane) == 0 {
		return false
	}
	for off := 0; off < len(plane); off += c.bs {
		if e, _ := c.sampled(p, off/c.bs, plane[off:min(off+c.bs, len(plane))]); e <= rawEntropy {
			return false // a block under 16 KiB is not sampled: 0
		}
	}
	return true
}

// blockSample is what sampled says of a block.
type blockSample struct{ entropy, top float64 }

// sampled is sampled(blk) for block b of plane p, as splitSampled
// counted it where it did.
func (c *coder) sampled(p, b int, blk []byte) (entropy, top float64) {
	if p >= 0 && p < len(c.pre) && b < len(c.pre[p]) {
		return c.pre[p][b].entropy, c.pre[p][b].top
	}
	return sampled(blk)
}

// splitSampled is split, and for two planes the samples of each block
// of both (sampled's bytes, every 16th) counted as the elements go by:
// read on their own, the samples took a pass over each plane, a twentieth
// of a repack.
func (c *coder) splitSampled(src []byte, planes [][]byte, width int) {
	c.pre = c.pre[:0]
	if width != 2 {
		split(src, planes, width)
		return
	}
	n := len(planes[0])
	blocks := (n + c.bs - 1) / c.bs
	for range 2 {
		c.pre = append(c.pre, make([]blockSample, 0, blocks))
	}
	for off := 0; off < n; off += c.bs {
		l := min(c.bs, n-off)
		var h [2][256]uint32
		ps := rest(planes, off)
		ps[0], ps[1] = ps[0][:l], ps[1][:l]
		el := src[2*off : 2*(off+l)]
		k := splitSampledFast(el, ps, &h)
		for i := k; i < l; i += 16 {
			h[0][el[2*i]]++
			h[1][el[2*i+1]]++
		}
		splitGo(el[2*k:], rest(ps, k), 2)
		for p := range 2 {
			var e, t float64
			if l >= 16<<10 { // as sampled: a block under 16 KiB is not
				var hi [256]int
				for v, x := range h[p] {
					hi[v] = int(x)
				}
				e, t = entropyOf(&hi, (l+15)/16)
			}
			c.pre[p] = append(c.pre[p], blockSample{e, t})
		}
	}
}

// entropyOf is the entropy in bits a byte of n bytes counted in h, and
// the share of the most frequent.
func entropyOf(h *[256]int, n int) (entropy, top float64) {
	most := 0
	for _, c := range h {
		if c > 0 {
			p := float64(c) / float64(n)
			entropy -= p * math.Log2(p)
			most = max(most, c)
		}
	}
	return entropy, float64(most) / float64(n)
}

// histogram sets h to the counts of b's bytes and returns the largest
// byte present and the largest count.
func histogram(b []byte, h *[256]uint32) (maxSym uint8, maxCount int) {
	var t [3][256]uint32
	*h = [256]uint32{}
	i := 0
	for ; i+4 <= len(b); i += 4 {
		h[b[i]]++
		t[0][b[i+1]]++
		t[1][b[i+2]]++
		t[2][b[i+3]]++
	}
	for ; i < len(b); i++ {
		h[b[i]]++
	}
	for k := range h {
		h[k] += t[0][k] + t[1][k] + t[2][k]
		if h[k] > 0 {
			maxSym, maxCount = uint8(k), max(maxCount, int(h[k]))
		}
	}
	return maxSym, maxCount
}

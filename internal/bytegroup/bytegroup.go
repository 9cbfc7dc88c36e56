package bytegroup

import (
	"bytes"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/fse"
	"github.com/klauspost/compress/huff0"
	"github.com/klauspost/compress/zstd"
)

// ErrCorrupt is returned for coded data that does not decode to the length
// the caller expects.
var ErrCorrupt = errors.New("bytegroup: corrupt coded data")

var (
	magic = [4]byte{'M', 'B', 'G', 1}
	// magicCtx: the planes' elements are ordered by the top byte of the
	// same element of a context array (a delta's base), see permute.
	magicCtx = [4]byte{'M', 'B', 'G', 2}
	// magicSub: the planes of a difference delta (delta.go), their elements
	// ordered by the exponent of the context's element.
	magicSub = [4]byte{'M', 'B', 'G', 3}
)

const (
	blockSize = 128 << 10 // under huff0's BlockSizeMax, one table per block
	// subBlockSize is the block of a difference delta (header 3): its
	// planes, ordered by exponent, change their statistics along the way,
	// which a table per 64 KiB follows better (−1.3% on a merged LoRA).
	subBlockSize = 64 << 10

	modeRaw   = 0
	modeHuff  = 1
	modeZstd  = 2
	kindRaw   = 0
	kindHuff  = 1
	kindRLE   = 2
	kindFSE   = 3
	maxHeader = 4 + 1 + binary.MaxVarintLen64
)

// WidthOf is the byte-plane count for a dtype name (SafeTensors spelling:
// BF16, F16, F32, F64, F8_E4M3, I32, …); dtypes that are not plain arrays of
// fixed-width numbers (quantized GGUF blocks, frames) get 1.
func WidthOf(dtype string) int {
	switch dtype {
	case "BF16", "F16", "I16", "U16":
		return 2
	case "F32", "I32", "U32":
		return 4
	case "F64", "I64", "U64":
		return 8
	}
	return 1
}

func validWidth(w int) bool { return w == 1 || w == 2 || w == 4 || w == 8 }

type coder struct {
	huff   huff0.Scratch
	henc   huffEncoder
	hdec   huffDecoder
	hout   []byte // huff4X's coding
	fse    fse.Scratch
	buf    []byte   // the planes, back to back
	planes [][]byte // views of buf
	tmp    []byte
	perm   []int32
	delta  []byte // a transformed array, where splitKeyed does not fit
	blk    []byte // a block of the last plane, decoded to be joined (joinLast)
	sample []byte // a sample's coding
	// pre[p][b]: sampled of block b of plane p, counted as the planes
	// were split (splitSampled); empty when they were not.
	pre [][]blockSample
	bs  int // the block size of the buffer being coded
}

// planesFor returns width planes of n bytes each.
func (c *coder) planesFor(n, width int) [][]byte {
	c.buf = grow(c.buf, n*width)
	c.planes = c.planes[:0]
	for p := range width {
		c.planes = append(c.planes, c.buf[p*n:(p+1)*n:(p+1)*n])
	}
	return c.planes
}

var coders = sync.Pool{New: func() any { return &coder{} }}

var (
	zOnce sync.Once
	zEnc  *zstd.Encoder
	zDec  *zstd.Decoder
)

func zstdCoders() (*zstd.Encoder, *zstd.Decoder) {
	zOnce.Do(func() {
		n := runtime.GOMAXPROCS(0)
		var err error
		zEnc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(n),
			zstd.WithEncoderCRC(false), zstd.WithLowerEncoderMem(true))
		if err != nil {
			panic(err) // only for invalid options
		}
		zDec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(n), zstd.WithDecoderMaxMemory(16<<20),
			zstd.WithDecoderMaxWindow(8<<20), zstd.WithDecodeAllCapLimit(true))
		if err != nil {
			panic(err)
		}
	})
	return zEnc, zDec
}

// Encode codes src as width byte planes (an invalid width counts as 1). The
// result may be larger than src: the caller keeps the smaller.
func Encode(src []byte, width int) []byte { return AppendEncode(nil, src, width) }

// AppendEncode is Encode appending to dst: a caller that codes many
// arrays reuses one buffer instead of a fresh one each (fresh memory is
// zeroed, faulted in and collected again).
func AppendEncode(dst, src []byte, width int) []byte {
	if !validWidth(width) {
		width = 1
	}
	return encode(dst, src, width, nil, asIs)
}

// EncodeWith is Encode with a context: the raw bytes of an array of the
// same dtype (a delta's base), which Decode must be given again. Each
// plane's elements are grouped by the sign and exponent byte of the
// context's element, so that each 128 KiB block's Huffman table fits
// elements of one magnitude: the bits a fine-tune changes depend on it.
func EncodeWith(src []byte, width int, ctx []byte) []byte {
	if !validWidth(width) {
		width = 1
	}
	if width == 1 {
		ctx = nil
	}
	return encode(nil, src, width, ctx, asIs)
}

// encode appends to dst the coding of src: without a context (ctx nil),
// header 1; else src's transform t against ctx, ordered by ctx's
// elements (permute), under header 2 (as is, XOR) or 3 (difference).
func encode(dst, src []byte, width int, ctx []byte, t transform) []byte {
	m := magic
	switch {
	case ctx != nil && t == byDifference:
		m = magicSub
	case ctx != nil:
		m = magicCtx
	}
	c := coders.Get().(*coder)
	defer coders.Put(c)
	c.bs = blockSizeOf(m)
	n := len(src) / width
	out := dst
	if need := len(src) + maxHeader + 16*width; cap(out)-len(out) < need {
		out = append(make([]byte, 0, len(out)+need), out...)
	}
	out = append(out, m[:]...)
	out = append(out, byte(width))
	out = binary.AppendUvarint(out, uint64(len(src)))
	planes := [][]byte{src[:n]}
	first := 0 // the plane planes[0] is
	c.pre = c.pre[:0]
	switch {
	case width > 1 && ctx != nil && keyedFits(n, width, ctx, t):
		planes = c.planesFor(n, width)
		splitKeyed(src, ctx, planes, width, t)
	case width > 1 && ctx != nil:
		c.delta = transformWhole(grow(c.delta, len(src)), src, ctx, width, t, false)
		src, t = c.delta, asIs // the tail is transformed too
		planes = c.planesFor(n, width)
		splitPermuted(src, planes, width, c.order(ctx, n, width, m == magicSub))
	case width > 1:
		planes = c.planesFor(n, width)
		if !rawShortcut || cap(out)-len(out) <= n {
			split(src, planes, width)
			break
		}
		// The first plane is split straight into out, as a raw plane: it
		// is one when every block samples incompressible (a BF16's low
		// byte), which coded would be split, copied in as raw blocks and
		// copied again as a raw plane, for the same bytes. Else it is
		// moved to its place and coded.
		mark, own := len(out), planes[0]
		out = append(out, modeRaw)
		planes[0], out = out[len(out):len(out)+n:len(out)+n], out[:len(out)+n]
		c.splitSampled(src, planes, width)
		if c.planeRaw(0, planes[0]) {
			planes, first = planes[1:], 1
			break
		}
		copy(own, planes[0])
		planes[0], out = own, out[:mark]
	}
	for i, plane := range planes {
		out = c.appendPlane(out, plane, first+i, width == 1)
	}
	c.pre = c.pre[:0]
	start := len(out)
	out = append(out, src[n*width:]...)
	if ctx != nil {
		transformTail(out[start:], ctx, n*width, t)
	}
	return out
}

// appendPlane appends one plane, coded the smallest way tried. The huff0
// blocks go straight into out and are cut off again if another way wins.
func (c *coder) appendPlane(out, plane []byte, p int, generic bool) []byte {
	c.huff.Reuse = huff0.ReusePolicyNone
	if rawShortcut && !generic && c.planeRaw(p, plane) {
		// Every block would be kept raw and then the plane (zstd is
		// tried only on generic bytes or planes coded below a quarter).
		out = append(out, modeRaw)
		return append(out, plane...)
	}
	start := len(out)
	out = append(out, modeHuff)
	for off := 0; off < len(plane); off += c.bs {
		blk := plane[off:min(off+c.bs, len(plane))]
		entropy, top := c.sampled(p, off/c.bs, blk)
		if entropy > rawEntropy { // the low mantissa bytes of weights: not worth a histogram
			out = append(out, kindRaw)
			out = append(out, blk...)
			continue
		}
		if top == 1 && oneValue(blk) {
			// What fse and huff0 each say after a histogram of the block
			// (a third of a delta's blocks): one compare of words instead.
			out = append(out, kindRLE, blk[0])
			continue
		}
		if top > fseShare {
			// Mostly one value (the high bytes of a delta): FSE codes it
			// below the bit a byte that Huffman needs; Huffman is not tried.
			if f, err := c.fseCompress(blk); err == nil && len(f)+binary.MaxVarintLen32 < len(blk) {
				out = append(out, kindFSE)
				out = binary.AppendUvarint(out, uint64(len(f)))
				out = append(out, f...)
				continue
			}
		}
		coded, err := c.huff4X(blk) // coded lives in c until its next use
		switch {
		case errors.Is(err, huff0.ErrUseRLE):
			out = append(out, kindRLE, blk[0])
		case err != nil || len(coded)+binary.MaxVarintLen32 >= len(blk):
			out = append(out, kindRaw)
			out = append(out, blk...)
		case len(coded) < len(blk)/4 && top == 0: // not sampled: try FSE too
			// Nearly one value (the high bytes of a delta): Huffman spends
			// at least a bit a byte, FSE does not.
			if f, err := c.fseCompress(blk); err == nil && len(f) < len(coded) {
				out = append(out, kindFSE)
				out = binary.AppendUvarint(out, uint64(len(f)))
				out = append(out, f...)
				continue
			}
			fallthrough
		default:
			out = append(out, kindHuff)
			out = binary.AppendUvarint(out, uint64(len(coded)))
			out = append(out, coded...)
		}
	}
	best, mode := len(out)-start-1, modeHuff
	if best >= len(plane) {
		best, mode = len(plane), modeRaw
	}
	// zstd finds repeats and codes below a bit a byte: it pays on generic
	// bytes (frames, JSON) and on planes that are nearly all one value. On
	// a plane of many blocks it is tried whole only when it beats the
	// first block's coding on that block. On the bench family no plane of
	// numbers coded at 0.8 bits a byte or more was coded smaller by zstd
	// (its wins: 0.36-0.75), while such planes were half its tries.
	if len(plane) > 0 && (generic || best*10 < len(plane)) && c.zstdMayPay(plane, out[start+1:]) {
		enc, _ := zstdCoders()
		c.tmp = enc.EncodeAll(plane, c.tmp[:0])
		if len(c.tmp)+binary.MaxVarintLen32 < best {
			mode = modeZstd
		}
	}
	switch mode {
	case modeZstd:
		out = append(out[:start], modeZstd)
		out = binary.AppendUvarint(out, uint64(len(c.tmp)))
		out = append(out, c.tmp...)
	case modeRaw:
		out = append(out[:start], modeRaw)
		out = append(out, plane...)
	}
	return out
}

// fseCompress is fse.Compress with the histogram counted here, four
// tables side by side: fse counts into one, where each increment of the
// nearly one value of these blocks waits for the one before it.
func (c *coder) fseCompress(blk []byte) ([]byte, error) {
	if len(blk) > 1 { // fse refuses shorter before it reads a histogram
		sym, most := histogram(blk, (*[256]uint32)(c.fse.Histogram()))
		c.fse.HistogramFinished(sym, most)
	}
	return fse.Compress(blk, &c.fse)
}

// zstdMayPay codes plane's first block with zstd and compares it with
// that block as coded (the start of blocks); a plane of one block is
// always worth trying whole.
func (c *coder) zstdMayPay(plane, blocks []byte) bool {
	if len(plane) <= 2*c.bs {
		return true
	}
	// The middle block: a plane ordered by a context has its least
	// typical elements at its ends.
	mid := len(plane) / c.bs / 2
	size := 0
	for i := 0; i <= mid; i++ {
		if len(blocks) == 0 {
			return true
		}
		size = 1 + c.bs // kind and raw bytes
		switch blocks[0] {
		case kindRLE:
			size = 2
		case kindHuff, kindFSE:
			l, k := binary.Uvarint(blocks[1:])
			if k <= 0 || uint64(len(blocks)-1-k) < l {
				return true
			}
			size = 1 + k + int(l)
		}
		if size > len(blocks) {
			return true
		}
		blocks = blocks[size:]
	}
	enc, _ := zstdCoders()
	c.tmp = enc.EncodeAll(plane[mid*c.bs:(mid+1)*c.bs], c.tmp[:0])
	return len(c.tmp)*10 < size*9
}

func blockSizeOf(m [4]byte) int {
	if m == magicSub {
		return subBlockSize
	}
	return blockSize
}

// Width returns the plane count of coded data, checking only its header.
func Width(enc []byte) (int, error) {
	if len(enc) < 5 || [4]byte(enc[:4]) != magic && [4]byte(enc[:4]) != magicCtx && [4]byte(enc[:4]) != magicSub || !validWidth(int(enc[4])) {
		return 0, ErrCorrupt
	}
	return int(enc[4]), nil
}

// order returns the permutation that a stable counting sort on a key of
// ctx's elements makes of n elements (perm[i] is element i's place; 0 is
// the key past ctx's end): the element's top byte, or, when exponent is
// set, the 8 bits under the top bit of its top two bytes (a BF16's or an
// F32's exponent, without the sign: the size of one step of its mantissa).
func (c *coder) order(ctx []byte, n, width int, exponent bool) []int32 {
	whole := min(n, len(ctx)/width)
	top := width - 1
	key := func(i int) byte { // past ctx's whole elements
		var e [8]byte
		copy(e[:width], ctx[min(i*width, len(ctx)):])
		if exponent {
			return byte((uint16(e[top])<<8 | uint16(e[top-1])) >> 7)
		}
		return e[top]
	}
	// Two passes over ctx, the key computed in each: counts, then places.
	var start [257]int32
	if exponent {
		for i := range whole {
			start[int(byte((uint16(ctx[i*width+top])<<8|uint16(ctx[i*width+top-1]))>>7))+1]++
		}
	} else {
		for i := range whole {
			start[int(ctx[i*width+top])+1]++
		}
	}
	for i := whole; i < n; i++ {
		start[int(key(i))+1]++
	}
	for k := 1; k < 257; k++ {
		start[k] += start[k-1]
	}
	c.perm = growInts(c.perm, n)
	perm := c.perm
	if exponent {
		for i := range whole {
			k := byte((uint16(ctx[i*width+top])<<8 | uint16(ctx[i*width+top-1])) >> 7)
			perm[i] = start[k]
			start[k]++
		}
	} else {
		for i := range whole {
			k := ctx[i*width+top]
			perm[i] = start[k]
			start[k]++
		}
	}
	for i := whole; i < n; i++ {
		k := key(i)
		perm[i] = start[k]
		start[k]++
	}
	return perm
}

func growInts(b []int32, n int) []int32 {
	if cap(b) < n {
		return make([]int32, n)
	}
	return b[:n]
}

// Decode decodes enc, which must hold exactly rawLen bytes, into dst (grown
// as needed) and returns it. Anything else is ErrCorrupt.
func Decode(dst, enc []byte, rawLen int) (out []byte, err error) {
	return decode(dst, enc, rawLen, nil, asIs)
}

// DecodeWith is Decode for data EncodeWith coded with the context ctx
// (data coded without one ignores it; data coded with one and given none is
// ErrCorrupt).
func DecodeWith(dst, enc []byte, rawLen int, ctx []byte) (out []byte, err error) {
	if len(enc) >= 4 && [4]byte(enc[:4]) == magicSub {
		return nil, fmt.Errorf("%w: a difference delta, which DecodeDelta reads", ErrCorrupt)
	}
	return decode(dst, enc, rawLen, ctx, asIs)
}

// decode is Decode of an array coded with the transform t against ctx
// (asIs: its context only orders it), which decode inverts.
func decode(dst, enc []byte, rawLen int, ctx []byte, t transform) (out []byte, err error) {
	return decodeTo(dst, enc, rawLen, ctx, t, nil)
}

// decodeTo is decode, or, given want and coded without a context in 2 or
// 4 planes, the check that the planes join to want (nil and nil, or
// ErrMismatch), without joining them into dst.
func decodeTo(dst, enc []byte, rawLen int, ctx []byte, t transform, want []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil { // a decoder library's bug never takes the process down
			out, err = nil, fmt.Errorf("%w: %v", ErrCorrupt, r)
		}
	}()
	width, err := Width(enc)
	if err != nil {
		return nil, err
	}
	withCtx := [4]byte(enc[:4]) != magic
	if withCtx && (ctx == nil || width == 1) {
		return nil, fmt.Errorf("%w: coded against a context it was not given", ErrCorrupt)
	}
	in := enc[5:]
	l, k := binary.Uvarint(in)
	if k <= 0 || rawLen < 0 || l != uint64(rawLen) {
		return nil, fmt.Errorf("%w: holds %d bytes, want %d", ErrCorrupt, l, rawLen)
	}
	in = in[k:]
	match := want != nil && !withCtx && (width == 2 || width == 4)
	if !match {
		dst = grow(dst, rawLen)
	}
	n := rawLen / width
	c := coders.Get().(*coder)
	defer coders.Put(c)
	c.bs = blockSizeOf([4]byte(enc[:4]))
	var planes [][]byte
	if width > 1 {
		planes = c.planesFor(n, width)
	} else {
		planes = [][]byte{dst[:n]}
	}
	if match && len(want) != rawLen {
		return nil, ErrMismatch
	}
	joined := false // the planes joined (or compared) as the last was decoded
	for i, plane := range planes {
		if width > 1 && len(in) > 0 && in[0] == modeRaw && len(in)-1 >= n {
			// A raw plane is joined straight from enc, never copied.
			planes[i], in = in[1:1+n:1+n], in[1+n:]
			continue
		}
		if i == width-1 && i > 0 && !withCtx && len(in) > 0 && in[0] == modeHuff {
			var into []byte
			if match {
				into = want
			} else {
				into = dst
			}
			if in, err = c.joinLast(in[1:], planes, width, into, match); err != nil {
				return nil, err
			}
			joined = true
			continue
		}
		if in, err = c.decodePlane(in, plane); err != nil {
			return nil, err
		}
	}
	if len(in) != rawLen-n*width {
		return nil, fmt.Errorf("%w: %d trailing bytes, want %d", ErrCorrupt, len(in), rawLen-n*width)
	}
	if match {
		if !joined && !joinEqual(want, planes, width) || !bytes.Equal(want[n*width:], in) {
			return nil, ErrMismatch
		}
		return nil, nil
	}
	copy(dst[n*width:], in)
	switch {
	case joined:
		return dst, nil
	case withCtx && keyedFits(n, width, ctx, t):
		joinKeyed(dst, ctx, planes, width, t)
		transformTail(dst[n*width:], ctx, n*width, t)
		return dst, nil
	case withCtx:
		joinPermuted(dst, planes, width, c.order(ctx, n, width, [4]byte(enc[:4]) == magicSub))
	case width > 1:
		join(dst, planes, width)
	}
	return transformWhole(dst, dst, ctx, width, t, true), nil
}

// sized splits a length-prefixed run off in.
func sized(in []byte) (run, rest []byte, err error) {
	l, k := binary.Uvarint(in)
	if k <= 0 || l > uint64(len(in)-k) {
		return nil, nil, ErrCorrupt
	}
	return in[k : k+int(l)], in[k+int(l):], nil
}

// XOR sets dst (grown as needed) to a XOR base over their common length and
// to a beyond it, and returns it. Applied twice with the same base it gives
// a back: it is both the delta and its inverse.
func XOR(dst, a, base []byte) []byte {
	dst = grow(dst, len(a))
	n := subtle.XORBytes(dst, a, base)
	copy(dst[n:], a[n:])
	return dst
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

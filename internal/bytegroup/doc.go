// Package bytegroup codes the bytes of numeric arrays losslessly: each
// element is split into its byte planes (BF16 and F16: 2, F32: 4, F8 and
// anything that is not a number: 1), and each plane is entropy coded on its
// own (huff0, or zstd where it pays), or kept raw when coding does not
// shrink it. The sign and exponent bytes of floating-point weights hold
// few distinct values and code to a fraction of their size; the low
// mantissa bytes are close to random and stay raw. XOR, applied first to a
// tensor and a close base of the same dtype (a fine-tune and its base),
// leaves mostly zero bits in every plane, which code to much less.
//
// A coded buffer (all integers unsigned varints unless noted):
//
//	magic "MBG" version (4 bytes: 1, or 2 when coded with a context: then
//	  every plane's elements are in the order of a stable sort on the top
//	  byte of the context's element, see EncodeWith; or 3, a difference
//	  delta: the same with the context element's exponent as the key, and
//	  64 KiB blocks, see delta.go)
//	width (1 byte: 1, 2, 4 or 8)
//	raw length
//	width planes, plane p holding byte p of every element:
//	  mode (1 byte)
//	    0 raw:   the plane's bytes
//	    1 huff0: its 128 KiB blocks (64 KiB in version 3), each: kind (1 byte; 0 raw, 1 huff0
//	             4X stream with its table, 2 one repeated byte, 3 FSE
//	             stream with its table, for blocks of nearly one value)
//	             then, for kinds 1 and 3, the stream's length and the
//	             stream; for kind 0 the block's bytes; for kind 2 the byte
//	    2 zstd:  the length of one zstd frame, the frame
//	the raw length mod width trailing bytes, raw
//
// Decoding never allocates more than the raw length it is told to expect
// (the caller's record of the blob), checks every length against it, and
// reports any inconsistency as ErrCorrupt.
package bytegroup

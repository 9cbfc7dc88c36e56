package bytegroup

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"

	"github.com/klauspost/compress/fse"
	"github.com/klauspost/compress/huff0"
)

// huffMin is the block length under which huff0.Compress4X codes a block
// itself: the histogram and table are the cost there, not the stream.
const huffMin = 4 << 10

// errNoHuff is a block that huff0 would not code (ErrIncompressible).
var errNoHuff = errors.New("bytegroup: huff0 would not code the block")

// huffEncoder writes the 4X stream of huff0.Compress4X, table first, byte
// for byte, from a histogram counted here (four tables side by side,
// histogram) and huff0's own table for it (BuildCTable, AppendTable):
// Compress4X counts with one table and codes a symbol in two steps a
// bit, which made it 40% of a repack's CPU. Its codes are the ones
// huff0's decoder reads from that table (codes), so that what it writes
// is decoded by huff0 as it always was; a test compares it with
// Compress4X over many distributions, and every coding is decoded again
// before it replaces raw bytes (store.CheckDecodes).
type huffEncoder struct {
	hist    [256]uint32
	code    [256]uint32 // value | bit count<<16
	weights [256]byte
	fse     fse.Scratch
	buf     []byte // a pair's second stream, before it is appended
}

// huff4X is huff0.Compress4X(blk), coded by huffEncoder past huffMin.
func (c *coder) huff4X(blk []byte) ([]byte, error) {
	if len(blk) < huffMin {
		coded, _, err := huff0.Compress4X(blk, &c.huff)
		return coded, err
	}
	var err error
	c.hout, err = c.henc.compress4X(c.hout[:0], blk, &c.huff)
	return c.hout, err
}

// compress4X appends huff0.Compress4X(blk)'s table and streams to out, or
// returns huff0.ErrUseRLE or errNoHuff where Compress4X fails, with out
// as it was.
func (e *huffEncoder) compress4X(out, blk []byte, s *huff0.Scratch) ([]byte, error) {
	_, most := histogram(blk, &e.hist)
	switch {
	case len(blk) > huff0.BlockSizeMax:
		return out, errNoHuff
	case most == len(blk):
		if len(blk) == 1 {
			return out, errNoHuff
		}
		return out, huff0.ErrUseRLE
	case most == 1 || most < len(blk)>>7: // compress's test: too flat
		return out, errNoHuff
	}
	s.Reuse = huff0.ReusePolicyNone
	if err := s.BuildCTable(&e.hist); err != nil {
		return out, errNoHuff
	}
	start := len(out)
	out, err := s.AppendTable(out)
	if err != nil || e.codes(out[start:]) != nil {
		return out[:start], errNoHuff
	}
	// The jump table: the lengths of the first three streams.
	jump := len(out)
	out = append(out, 0, 0, 0, 0, 0, 0)
	out, lens := e.streams(out, blk)
	for i, n := range lens {
		if n > math.MaxUint16 {
			return out[:start], errNoHuff
		}
		if i < 3 {
			binary.LittleEndian.PutUint16(out[jump+2*i:], uint16(n))
		}
	}
	if len(out)-start >= len(blk) {
		return out[:start], errNoHuff
	}
	return out, nil
}

// codes sets e.code from a huff0 table (what AppendTable writes), the
// way huff0's decoder reads it (readWeights, as ReadTable): canonical
// codes given by rank, a weight's codes after all those of lower weights.
func (e *huffEncoder) codes(table []byte) error {
	n, tableLog, _, ranks, err := readWeights(table, &e.weights, &e.fse)
	if err != nil {
		return err
	}
	var next [16]uint32
	at := uint32(0)
	for w := 1; w <= tableLog; w++ {
		next[w] = at
		at += ranks[w] << (w - 1)
	}
	e.code = [256]uint32{}
	for sym, w := range e.weights[:n] {
		if w == 0 {
			continue
		}
		e.code[sym] = next[w]>>(w-1) | uint32(tableLog+1-int(w))<<16
		next[w] += 1 << (w - 1)
	}
	for sym, c := range e.hist {
		if c > 0 && e.code[sym]>>16 == 0 {
			return errNoHuff // the table cannot code the block
		}
	}
	return nil
}

// streams appends the 1X streams of blk's four segments (a quarter each,
// rounded up, the last shorter), one after the other, and returns their
// lengths, coded two at a time (pair).
func (e *huffEncoder) streams(out, blk []byte) ([]byte, [4]int) {
	seg := (len(blk) + 3) / 4
	var parts [4][]byte
	for i := range parts {
		parts[i] = blk[min(i*seg, len(blk)):min((i+1)*seg, len(blk))]
	}
	var lens [4]int
	for i := 0; i < 4; i += 2 {
		out, lens[i], lens[i+1] = e.pair(out, parts[i], parts[i+1])
	}
	return out, lens
}

// pairOneByOne is pair with each stream coded on its own.
func (e *huffEncoder) pairOneByOne(out, a, b []byte) ([]byte, int, int) {
	out, la := e.one(out, a)
	out, lb := e.one(out, b)
	return out, la, lb
}

// one appends the stream of src and returns its length.
func (e *huffEncoder) one(out, src []byte) ([]byte, int) {
	at := len(out)
	out = slices.Grow(out, room(len(src)))[:at+room(len(src))]
	n := e.finish(out[at:], 0, 0, 0, src)
	return out[:at+n], n
}

// room is the most a stream of n symbols takes: 11 bits a symbol, and a
// word's slack for the last whole-word store.
func room(n int) int { return n*11/8 + 16 }

// finish codes src into b past its at bytes, after the nb bits of acc
// that come before (a stream coded this far by codePair, or nothing): its
// symbols from the last to the first (huff0's decoder reads a stream
// backwards), bit after bit from each byte's lowest, then a 1 bit and
// zeros to the byte. It returns the stream's length.
func (e *huffEncoder) finish(b []byte, at int, acc uint64, nb uint, src []byte) int {
	code := &e.code
	i := len(src)
	// Four symbols (44 bits at most) a step, then the whole bytes out.
	for ; i >= 4; i -= 4 {
		s := src[i-4 : i : i]
		c0, c1, c2, c3 := code[s[3]], code[s[2]], code[s[1]], code[s[0]]
		acc |= uint64(c0&0xffff) << (nb & 63)
		nb += uint(c0 >> 16)
		acc |= uint64(c1&0xffff) << (nb & 63)
		nb += uint(c1 >> 16)
		acc |= uint64(c2&0xffff) << (nb & 63)
		nb += uint(c2 >> 16)
		acc |= uint64(c3&0xffff) << (nb & 63)
		nb += uint(c3 >> 16)
		binary.LittleEndian.PutUint64(b[at:], acc)
		at += int(nb >> 3)
		acc >>= nb & 56
		nb &= 7
	}
	for i--; i >= 0; i-- {
		c := code[src[i]]
		acc |= uint64(c&0xffff) << (nb & 63)
		nb += uint(c >> 16)
	}
	acc |= 1 << (nb & 63) // the end mark
	nb++
	binary.LittleEndian.PutUint64(b[at:], acc)
	return at + int(nb+7)/8
}

package bytegroup

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/klauspost/compress/fse"
)

// huffDecoder decodes the huff0 4X blocks of a plane (what huff0's
// Decompress4X reads, table first) with a table that gives up to four
// symbols a lookup: the codes of a plane's sign and exponent bytes are 2
// to 4 bits long, so that one lookup of the 11 bits huff0 peeks holds
// three or four of them, where huff0's decoder takes one a lookup. It was
// the largest cost of a repack (its decode-back check) and of a checkout
// of coded blobs. A test decodes what huff0.Compress4X and huffEncoder
// write with both, over many distributions and lengths, and a fuzz
// target compares the two on any bytes.
type huffDecoder struct {
	weights [256]byte
	fse     fse.Scratch
	// single[i]: the symbol whose code is the top of the 11 bits i, and
	// its code length<<8 (huff0's table, widened to 11 bits whatever the
	// block's tableLog: one shift for every block).
	single [1 << huffLogMax]uint16
	// multi[i]: the symbols whose codes lie whole in the 11 bits i, at
	// most four: their bytes (bits 0-31, the first lowest), the bits they
	// take (32-39) and their count (40-47), so that a lookup is a store of
	// 4 bytes and two adds (huffdec_amd64.s). Built only for blocks of
	// multiMin bytes or more (hasMulti).
	multi    [1 << huffLogMax]uint64
	cum      [1 << huffLogMax]uint16 // where multi's first three symbols end: 4 bits each, 15 for none
	hasMulti bool
}

// multiMin is the block length from which the four-symbol table (2048
// entries to build) pays against a symbol a lookup.
const multiMin = 8 << 10

// huffLogMax is huff0's longest code (tableLogMax).
const huffLogMax = 11

// huffMask bounds a table index (to its size: no bounds check).
const huffMask = 1<<huffLogMax - 1

// readWeights reads a huff0 table at the start of table, as huff0's
// ReadTable reads and checks it: the weights of n symbols into w (the
// last one implied; 0: absent, else a code of tableLog+1-weight bits),
// the count of each weight, and the bytes the table took.
func readWeights(table []byte, w *[256]byte, f *fse.Scratch) (n, tableLog, size int, ranks [16]uint32, err error) {
	if len(table) < 2 {
		return 0, 0, 0, ranks, errNoHuff
	}
	if hdr := int(table[0]); hdr >= 128 { // four bits a weight
		n = hdr - 127
		size = 1 + (n+1)/2
		if size > len(table) {
			return 0, 0, 0, ranks, errNoHuff
		}
		for i := 0; i < n; i += 2 {
			w[i], w[i+1] = table[1+i/2]>>4, table[1+i/2]&15
		}
	} else {
		size = 1 + hdr
		if size > len(table) {
			return 0, 0, 0, ranks, errNoHuff
		}
		f.DecompressLimit = 255
		f.Out = w[:0]
		got, err := fse.Decompress(table[1:size], f)
		f.Out = nil
		if err != nil || len(got) > 255 {
			return 0, 0, 0, ranks, errNoHuff
		}
		n = copy(w[:], got)
	}
	total := uint32(0)
	for _, x := range w[:n] {
		if x > huffLogMax {
			return 0, 0, 0, ranks, errNoHuff
		}
		ranks[x]++
		total += 1 << x >> 1
	}
	if total == 0 {
		return 0, 0, 0, ranks, errNoHuff
	}
	tableLog = bits.Len32(total)
	rest := uint32(1)<<tableLog - total
	if tableLog > huffLogMax || rest&(rest-1) != 0 {
		return 0, 0, 0, ranks, errNoHuff
	}
	w[n] = byte(bits.Len32(rest))
	ranks[w[n]]++
	n++
	if ranks[1] < 2 || ranks[1]&1 != 0 { // a tree's deepest level: pairs
		return 0, 0, 0, ranks, errNoHuff
	}
	return n, tableLog, size, ranks, nil
}

// readTable reads a block's table and builds the decoding tables from
// it for a block of n bytes; it returns the block's streams.
func (d *huffDecoder) readTable(in []byte, n int) ([]byte, error) {
	syms, tl, size, ranks, err := readWeights(in, &d.weights, &d.fse)
	if err != nil {
		return nil, fmt.Errorf("%w: huff0 table", ErrCorrupt)
	}
	// Canonical codes by rank, as huff0 fills its table: a weight's
	// codes after all those of lower weights, 2^(weight-1) entries each
	// in a table of tableLog bits, 2^(weight-1+11-tableLog) in 11 bits.
	wide := huffLogMax - tl
	var next [16]uint32
	at := uint32(0)
	for w := 1; w <= tl; w++ {
		next[w] = at
		at += ranks[w] << (w - 1 + wide)
	}
	for sym, w := range d.weights[:syms] {
		if w == 0 {
			continue
		}
		e := uint16(sym) | uint16(tl+1-int(w))<<8
		run := d.single[next[w] : next[w]+1<<(int(w)-1+wide)]
		for i := range run {
			run[i] = e
		}
		next[w] += 1 << (int(w) - 1 + wide)
	}
	d.hasMulti = n >= multiMin
	if d.hasMulti {
		d.build()
	}
	return in[size:], nil
}

// build fills multi from single in one pass: entry i is its first
// symbol a, then the first symbols of the entry its remaining 11-la bits
// start (i<<la), those that lie whole in them (cum). That entry has more
// trailing zero bits than i (or is 0, done first), so the entries are
// filled by decreasing trailing zeros. Without branches: which entries
// take more symbols follows the data, and mispredicted it cost as much
// as the rest.
func (d *huffDecoder) build() {
	// Entry 0: its first symbol, again and again (its bits are zeros).
	l0 := uint64(d.single[0] >> 8)
	n0 := min(4, huffLogMax/l0)
	e0, c0 := uint64(0), uint64(0xfff)
	for k := range n0 {
		e0 |= uint64(d.single[0]&0xff) << (8 * k)
		if k < 3 {
			c0 = c0&^(15<<(4*k)) | (k+1)*l0<<(4*k)
		}
	}
	d.multi[0], d.cum[0] = e0|n0*l0<<32|n0<<40, uint16(c0)
	for tz := huffLogMax - 1; tz >= 0; tz-- {
		d.fill(1<<tz, 2<<tz)
	}
}

// fillGo fills the entries i, i+step, … of multi and cum (build).
func (d *huffDecoder) fillGo(i, step int) {
	for ; i < len(d.single); i += step {
		a := uint64(d.single[i])
		la := a >> 8
		j := (i << (la & 15)) & huffMask
		e, cm := d.multi[j], uint64(d.cum[j])
		r := huffLogMax - la
		// m: how many of e's first three symbols end within r bits
		// (cum holds their ends, 15 past the count).
		f1 := uint64(int64(r-cm&15) >> 63 & 1)
		f2 := uint64(int64(r-cm>>4&15) >> 63 & 1)
		f3 := uint64(int64(r-cm>>8&15) >> 63 & 1)
		m := 3 - f1 - f2 - f3
		end := (cm << 4 >> (4 * m)) & 15 // the m-th's end, 0 for none
		syms := (e&(1<<(8*m)-1))<<8 | a&0xff
		d.multi[i&huffMask] = syms | (la+end)<<32 | (1+m)<<40
		// The new ends: la, then la + e's, 15 past the count.
		keep := uint64(1)<<(4*m) - 1
		ends := (cm+la*0x111)&keep | 0xfff&^keep
		d.cum[i&huffMask] = uint16(la | ends<<4&0xff0)
	}
}

// huffStream reads one stream backwards, as huff0 writes it: the window
// is the 8 bytes before pos (near the start, the pos bytes there, at its
// top), of which the top c bits are read.
type huffStream struct {
	in  []byte
	pos int
	c   uint
}

// start places s at the end of in, past the end mark (the top 1 bit of
// the last byte).
func (s *huffStream) start(in []byte) error {
	if len(in) == 0 || in[len(in)-1] == 0 {
		return fmt.Errorf("%w: huff0 stream end", ErrCorrupt)
	}
	s.in, s.pos, s.c = in, len(in), uint(9-bits.Len8(in[len(in)-1]))
	return nil
}

// reload moves the window down by the whole bytes read and returns it.
func (s *huffStream) reload() uint64 {
	s.pos -= int(s.c >> 3)
	s.c &= 7
	if s.pos >= 8 {
		return binary.LittleEndian.Uint64(s.in[s.pos-8 : s.pos])
	}
	var b [8]byte
	copy(b[8-s.pos:], s.in[:s.pos])
	return binary.LittleEndian.Uint64(b[:])
}

// decode4X decodes src, a block's four streams after its table, into
// dst, which it fills exactly, or fails with ErrCorrupt.
func (d *huffDecoder) decode4X(dst, src []byte) error {
	if len(src) < 6+4 {
		return fmt.Errorf("%w: huff0 block", ErrCorrupt)
	}
	var st [4]huffStream
	at := 6
	for i := range 3 {
		l := int(binary.LittleEndian.Uint16(src[2*i:]))
		if at+l >= len(src) {
			return fmt.Errorf("%w: huff0 jump table", ErrCorrupt)
		}
		if err := st[i].start(src[at : at+l]); err != nil {
			return err
		}
		at += l
	}
	if err := st[3].start(src[at:]); err != nil {
		return err
	}
	seg := (len(dst) + 3) / 4
	var o, end [4]int
	for i := range o {
		o[i], end[i] = min(i*seg, len(dst)), min((i+1)*seg, len(dst))
	}
	if d.hasMulti {
		d.fast4(dst, &st, &o, &end)
	}
	for i := range st {
		if err := d.finish(dst, &st[i], o[i], end[i]); err != nil {
			return err
		}
	}
	return nil
}

// fast4Go decodes the four streams side by side (one stream's lookups wait
// on each other: each one's bits are known after the one before) while
// each has a whole window and room for four lookups' stores, and leaves
// st and o where they stopped.
func (d *huffDecoder) fast4Go(dst []byte, st *[4]huffStream, o, end *[4]int) {
	t := &d.multi
	s0, s1, s2, s3 := st[0].in, st[1].in, st[2].in, st[3].in
	p0, p1, p2, p3 := st[0].pos, st[1].pos, st[2].pos, st[3].pos
	c0, c1, c2, c3 := st[0].c, st[1].c, st[2].c, st[3].c
	o0, o1, o2, o3 := o[0], o[1], o[2], o[3]
	for {
		q0, q1, q2, q3 := p0-int(c0>>3), p1-int(c1>>3), p2-int(c2>>3), p3-int(c3>>3)
		if q0 < 8 || q1 < 8 || q2 < 8 || q3 < 8 ||
			o0+16 > end[0] || o1+16 > end[1] || o2+16 > end[2] || o3+16 > end[3] {
			break
		}
		p0, p1, p2, p3 = q0, q1, q2, q3
		c0, c1, c2, c3 = c0&7, c1&7, c2&7, c3&7
		v0 := binary.LittleEndian.Uint64(s0[p0-8 : p0])
		v1 := binary.LittleEndian.Uint64(s1[p1-8 : p1])
		v2 := binary.LittleEndian.Uint64(s2[p2-8 : p2])
		v3 := binary.LittleEndian.Uint64(s3[p3-8 : p3])
		// Four lookups a stream: at most 7+44 bits of the window.
		for range 4 {
			x0 := t[(v0<<(c0&63))>>(64-huffLogMax)]
			x1 := t[(v1<<(c1&63))>>(64-huffLogMax)]
			x2 := t[(v2<<(c2&63))>>(64-huffLogMax)]
			x3 := t[(v3<<(c3&63))>>(64-huffLogMax)]
			binary.LittleEndian.PutUint32(dst[o0:], uint32(x0))
			binary.LittleEndian.PutUint32(dst[o1:], uint32(x1))
			binary.LittleEndian.PutUint32(dst[o2:], uint32(x2))
			binary.LittleEndian.PutUint32(dst[o3:], uint32(x3))
			o0, c0 = o0+int(x0>>40&7), c0+uint(x0>>32&15)
			o1, c1 = o1+int(x1>>40&7), c1+uint(x1>>32&15)
			o2, c2 = o2+int(x2>>40&7), c2+uint(x2>>32&15)
			o3, c3 = o3+int(x3>>40&7), c3+uint(x3>>32&15)
		}
	}
	st[0].pos, st[1].pos, st[2].pos, st[3].pos = p0, p1, p2, p3
	st[0].c, st[1].c, st[2].c, st[3].c = c0, c1, c2, c3
	o[0], o[1], o[2], o[3] = o0, o1, o2, o3
}

// finish decodes the rest of one stream into dst[o:end]: four lookups a
// window while it is whole and there is room, then a symbol at a time,
// each checked against the bits left; the stream must end exactly there.
func (d *huffDecoder) finish(dst []byte, s *huffStream, o, end int) error {
	t := &d.multi
	for d.hasMulti {
		q := s.pos - int(s.c>>3)
		if q < 8 || o+16 > end {
			break
		}
		s.pos, s.c = q, s.c&7
		v := binary.LittleEndian.Uint64(s.in[q-8 : q])
		for range 4 {
			x := t[(v<<(s.c&63))>>(64-huffLogMax)]
			binary.LittleEndian.PutUint32(dst[o:], uint32(x))
			o, s.c = o+int(x>>40&7), s.c+uint(x>>32&15)
		}
	}
	for ; o < end; o++ {
		v := s.reload()
		x := d.single[(v<<(s.c&63))>>(64-huffLogMax)]
		s.c += uint(x >> 8)
		if int(s.c) > 8*s.pos {
			return fmt.Errorf("%w: huff0 stream overrun", ErrCorrupt)
		}
		dst[o] = byte(x)
	}
	if int(s.c) != 8*s.pos {
		return fmt.Errorf("%w: huff0 stream: %d bits left", ErrCorrupt, 8*s.pos-int(s.c))
	}
	return nil
}

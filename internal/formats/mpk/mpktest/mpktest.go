// Package mpktest builds MPK test archives byte by byte: tar streams with
// full control over every header field (so that hostile entries can be
// written: bad names, links, devices, wrong checksums, sizes that lie), and
// gzip streams from a tiny deflate encoder of its own, whose bytes are fixed
// by this code and the formats' specifications, never by a Go release.
//
// The fixture generator of formats/mpk, and the archiver, restorer and e2e
// tests use it. Nothing here is used by mstore itself.
package mpktest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sort"
	"strconv"
)

// Block is the tar block size.
const Block = 512

// Entry is one tar entry. The zero Type is a regular file ('0').
type Entry struct {
	Name string // raw bytes of the name field (at most 100 bytes; longer names need PAX)
	Type byte
	Data []byte
	// Size is the size the header declares; 0 means len(Data). The builder
	// always writes Data (padded), whatever Size says.
	Size     int64
	Linkname string
	// PAX, when not empty, is written as a PAX extended header ('x') before
	// the entry, its records in key order.
	PAX map[string]string
	// BadChecksum writes a header checksum off by one.
	BadChecksum bool
	// Magic overrides "ustar\x00" + "00" (8 bytes), for v7 or GNU headers.
	Magic string
}

// File is a regular file entry.
func File(name string, data []byte) Entry { return Entry{Name: name, Data: data} }

// Dir is a directory entry.
func Dir(name string) Entry { return Entry{Name: name, Type: '5'} }

// TarOptions change how a stream ends.
type TarOptions struct {
	NoEndMarker bool   // leave out the two zero blocks
	Trailing    []byte // bytes appended after the end marker
}

// Tar returns the tar stream of entries.
func Tar(entries []Entry, opts TarOptions) []byte {
	var b bytes.Buffer
	for _, e := range entries {
		if len(e.PAX) > 0 {
			rec := PAXRecords(e.PAX)
			writeEntry(&b, Entry{Name: "PaxHeader", Type: 'x', Data: rec})
		}
		writeEntry(&b, e)
	}
	if !opts.NoEndMarker {
		b.Write(make([]byte, 2*Block))
	}
	b.Write(opts.Trailing)
	return b.Bytes()
}

func writeEntry(b *bytes.Buffer, e Entry) {
	b.Write(Header(e))
	b.Write(e.Data)
	if pad := len(e.Data) % Block; pad != 0 {
		b.Write(make([]byte, Block-pad))
	}
}

// Header returns the 512-byte USTAR header of e.
func Header(e Entry) []byte {
	h := make([]byte, Block)
	if len(e.Name) > 100 || len(e.Linkname) > 100 {
		panic(fmt.Sprintf("mpktest: name or link longer than 100 bytes: %q", e.Name))
	}
	copy(h[0:], e.Name)
	mode := "0000644"
	if e.Type == '5' {
		mode = "0000755"
	}
	copy(h[100:], mode+"\x00")
	copy(h[108:], "0000000\x00") // uid
	copy(h[116:], "0000000\x00") // gid
	size := e.Size
	if size == 0 {
		size = int64(len(e.Data))
	}
	putSize(h[124:136], size)
	copy(h[136:], "00000000000\x00") // mtime 0
	typ := e.Type
	if typ == 0 {
		typ = '0'
	}
	h[156] = typ
	copy(h[157:], e.Linkname)
	magic := e.Magic
	if magic == "" {
		magic = "ustar\x0000"
	}
	copy(h[257:265], magic)
	if typ == '3' || typ == '4' {
		copy(h[329:], "0000001\x00")
		copy(h[337:], "0000003\x00")
	}
	for i := 148; i < 156; i++ {
		h[i] = ' '
	}
	var sum int64
	for _, c := range h {
		sum += int64(c)
	}
	if e.BadChecksum {
		sum++
	}
	copy(h[148:], fmt.Sprintf("%06o\x00 ", sum))
	return h
}

// putSize writes n as 11 octal digits, or in base-256 when it does not fit.
func putSize(field []byte, n int64) {
	if n < 1<<33 {
		copy(field, fmt.Sprintf("%011o\x00", n))
		return
	}
	clear(field)
	binary.BigEndian.PutUint64(field[len(field)-8:], uint64(n))
	field[0] |= 0x80
}

// PAXRecords encodes PAX records "LEN KEY=VALUE\n" in key order; LEN
// counts the whole record, its own digits included.
func PAXRecords(recs map[string]string) []byte {
	keys := make([]string, 0, len(recs))
	for k := range recs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b []byte
	for _, k := range keys {
		body := " " + k + "=" + recs[k] + "\n"
		n := len(body)
		for len(body)+len(strconv.Itoa(n)) != n {
			n = len(body) + len(strconv.Itoa(n))
		}
		b = append(b, strconv.Itoa(n)+body...)
	}
	return b
}

// Gzip returns a complete gzip file holding data: a 10-byte header with
// no name and modification time 0, one deflate block (see Deflate), the
// CRC-32 and the length.
func Gzip(data []byte) []byte {
	return append(GzipBlocks(data), GzipTrailer(data)...)
}

// GzipBlocks is Gzip without its 8-byte trailer, for building broken
// streams by hand.
func GzipBlocks(data []byte) []byte {
	return append([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, Deflate(data)...)
}

// Deflate compresses data into one final deflate block with the fixed
// Huffman codes, using only matches at distance 1 (runs of one byte value,
// which is most of a tar stream). Its output is fixed by this code and by
// RFC 1951 alone, unlike compress/flate's, which a Go release may change.
func Deflate(data []byte) []byte {
	var w bitWriter
	w.bits(1, 1) // BFINAL
	w.bits(1, 2) // BTYPE 01: fixed Huffman codes
	for i := 0; i < len(data); {
		b := data[i]
		w.symbol(int(b))
		i++
		for {
			n := 0
			for i+n < len(data) && data[i+n] == b && n < 258 {
				n++
			}
			if n < 3 {
				break
			}
			w.match(n)
			i += n
		}
	}
	w.symbol(256) // end of block
	return w.flush()
}

type bitWriter struct {
	out []byte
	acc uint64
	n   uint
}

// bits writes the n low bits of v, least significant first.
func (w *bitWriter) bits(v uint64, n uint) {
	w.acc |= v << w.n
	w.n += n
	for w.n >= 8 {
		w.out = append(w.out, byte(w.acc))
		w.acc >>= 8
		w.n -= 8
	}
}

// code writes an n-bit Huffman code, most significant bit first.
func (w *bitWriter) code(c uint64, n uint) {
	var r uint64
	for i := uint(0); i < n; i++ {
		r = r<<1 | (c>>i)&1
	}
	w.bits(r, n)
}

// symbol writes a literal/length symbol with the fixed codes.
func (w *bitWriter) symbol(s int) {
	switch {
	case s < 144:
		w.code(uint64(0x30+s), 8)
	case s < 256:
		w.code(uint64(0x190+s-144), 9)
	case s < 280:
		w.code(uint64(s-256), 7)
	default:
		w.code(uint64(0xc0+s-280), 8)
	}
}

var (
	lengthBase  = [...]int{3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258}
	lengthExtra = [...]uint{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
)

// match writes a copy of n (3..258) bytes from distance 1.
func (w *bitWriter) match(n int) {
	i := len(lengthBase) - 1
	if n < 258 {
		for i = len(lengthBase) - 2; lengthBase[i] > n; i-- {
		}
	}
	w.symbol(257 + i)
	w.bits(uint64(n-lengthBase[i]), lengthExtra[i])
	w.code(0, 5) // distance code 0: distance 1
}

func (w *bitWriter) flush() []byte {
	if w.n > 0 {
		w.out = append(w.out, byte(w.acc))
		w.acc, w.n = 0, 0
	}
	return w.out
}

// GzipTrailer returns the gzip trailer of data: its CRC-32 and length.
func GzipTrailer(data []byte) []byte {
	out := binary.LittleEndian.AppendUint32(nil, crc32.ChecksumIEEE(data))
	return binary.LittleEndian.AppendUint32(out, uint32(len(data)))
}

package bytegroup

import (
	"fmt"

	"github.com/klauspost/compress/fse"
)

// decodePlane fills plane (its length is the plane's) from in and returns
// the rest of in.
func (c *coder) decodePlane(in, plane []byte) ([]byte, error) {
	if len(in) < 1 {
		return nil, ErrCorrupt
	}
	mode := in[0]
	in = in[1:]
	switch mode {
	case modeRaw:
		if len(in) < len(plane) {
			return nil, ErrCorrupt
		}
		copy(plane, in)
		return in[len(plane):], nil
	case modeZstd:
		frame, rest, err := sized(in)
		if err != nil {
			return nil, err
		}
		_, dec := zstdCoders()
		got, err := dec.DecodeAll(frame, plane[:0:len(plane)])
		if err != nil || len(got) != len(plane) {
			return nil, fmt.Errorf("%w: zstd plane", ErrCorrupt)
		}
		if len(got) > 0 && &got[0] != &plane[0] {
			copy(plane, got)
		}
		return rest, nil
	case modeHuff:
		for off := 0; off < len(plane); off += c.bs {
			var err error
			if in, err = c.decodeBlock(in, plane[off:min(off+c.bs, len(plane))]); err != nil {
				return nil, err
			}
		}
		return in, nil
	}
	return nil, fmt.Errorf("%w: plane mode %d", ErrCorrupt, mode)
}

// decodeBlock fills blk, one block of a modeHuff plane, from in and
// returns the rest of in.
func (c *coder) decodeBlock(in, blk []byte) ([]byte, error) {
	if len(in) < 1 {
		return nil, ErrCorrupt
	}
	kind := in[0]
	in = in[1:]
	switch kind {
	case kindRaw:
		if len(in) < len(blk) {
			return nil, ErrCorrupt
		}
		copy(blk, in)
		in = in[len(blk):]
	case kindRLE:
		if len(in) < 1 {
			return nil, ErrCorrupt
		}
		blk[0] = in[0]
		for k := 1; k < len(blk); k *= 2 {
			copy(blk[k:], blk[:k])
		}
		in = in[1:]
	case kindHuff:
		stream, rest, err := sized(in)
		if err != nil {
			return nil, err
		}
		in = rest
		body, err := c.hdec.readTable(stream, len(blk))
		if err != nil {
			return nil, err
		}
		if err := c.hdec.decode4X(blk, body); err != nil {
			return nil, err
		}
	case kindFSE:
		stream, rest, err := sized(in)
		if err != nil {
			return nil, err
		}
		in = rest
		c.fse.DecompressLimit = len(blk)
		got, err := fse.Decompress(stream, &c.fse)
		if err != nil || len(got) != len(blk) {
			return nil, fmt.Errorf("%w: fse block", ErrCorrupt)
		}
		copy(blk, got)
	default:
		return nil, fmt.Errorf("%w: block kind %d", ErrCorrupt, kind)
	}
	return in, nil
}

// joinLast decodes the last plane (modeHuff, in past its mode byte)
// block by block into c.blk and joins each block with the same elements
// of the planes before it (decoded whole) into dst, or, compare, checks
// that they join to dst's bytes: decoded whole first, the last plane
// went out of the cache before the join read it back.
func (c *coder) joinLast(in []byte, planes [][]byte, width int, dst []byte, compare bool) ([]byte, error) {
	n := len(planes[0])
	c.blk = grow(c.blk, c.bs)
	var seg [8][]byte // validWidth's most
	for off := 0; off < n; off += c.bs {
		l := min(c.bs, n-off)
		var err error
		if in, err = c.decodeBlock(in, c.blk[:l]); err != nil {
			return nil, err
		}
		for p := range width - 1 {
			seg[p] = planes[p][off : off+l]
		}
		seg[width-1] = c.blk[:l]
		elems := dst[off*width : (off+l)*width]
		switch {
		case !compare:
			join(elems, seg[:width], width)
		case !joinEqual(elems, seg[:width], width):
			return nil, ErrMismatch
		}
	}
	return in, nil
}

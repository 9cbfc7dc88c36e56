package bytegroup

import "encoding/binary"

// split writes byte p of element i of src to planes[p][i], for the n =
// len(planes[0]) whole elements of src, in one pass.
func split(src []byte, planes [][]byte, width int) {
	if k := splitFast(src, planes, width); k > 0 {
		src, planes = src[k*width:], rest(planes, k)
	}
	splitGo(src, planes, width)
}

// join is split's inverse.
func join(dst []byte, planes [][]byte, width int) {
	if k := joinFast(dst, planes, width); k > 0 {
		dst, planes = dst[k*width:], rest(planes, k)
	}
	joinGo(dst, planes, width)
}

// joinEqual reports whether join(raw, planes, width) would leave raw as
// it is: the planes compared with raw as they are joined.
func joinEqual(raw []byte, planes [][]byte, width int) bool {
	k, ok := joinEqualFast(raw, planes, width)
	if !ok {
		return false
	}
	raw, planes = raw[k*width:], rest(planes, k)
	for p, pl := range planes {
		for i, b := range pl {
			if raw[i*width+p] != b {
				return false
			}
		}
	}
	return true
}

// rest returns the planes past their first k elements.
func rest(planes [][]byte, k int) [][]byte {
	var r [8][]byte // validWidth's most: no allocation
	for p, pl := range planes {
		r[p] = pl[k:]
	}
	return r[:len(planes)]
}

// splitGo is split in Go, for what the assembly does not do.
func splitGo(src []byte, planes [][]byte, width int) {
	n := len(planes[0])
	switch width {
	case 2:
		p0, p1, s := planes[0][:n], planes[1][:n], src[:2*n]
		// Eight elements a step, the slices cut as it goes: the bounds
		// checks of indexed loads and stores cost more than the shifts.
		for len(s) >= 16 && len(p0) >= 8 && len(p1) >= 8 {
			x0, x1 := binary.LittleEndian.Uint64(s[:8]), binary.LittleEndian.Uint64(s[8:16])
			binary.LittleEndian.PutUint64(p0[:8], uint64(evenBytes(x0))|uint64(evenBytes(x1))<<32)
			binary.LittleEndian.PutUint64(p1[:8], uint64(evenBytes(x0>>8))|uint64(evenBytes(x1>>8))<<32)
			s, p0, p1 = s[16:], p0[8:], p1[8:]
		}
		for i := range p0 {
			p0[i], p1[i] = s[2*i], s[2*i+1]
		}
	case 4:
		p0, p1, p2, p3 := planes[0][:n], planes[1][:n], planes[2][:n], planes[3][:n]
		for i := range n {
			s := src[4*i : 4*i+4 : 4*i+4]
			p0[i], p1[i], p2[i], p3[i] = s[0], s[1], s[2], s[3]
		}
	default:
		for i := range n {
			s := src[i*width : i*width+width]
			for p, b := range s {
				planes[p][i] = b
			}
		}
	}
}

// joinGo is splitGo's inverse.
func joinGo(dst []byte, planes [][]byte, width int) {
	n := len(planes[0])
	switch width {
	case 2:
		p0, p1, d := planes[0][:n], planes[1][:n], dst[:2*n]
		for len(d) >= 16 && len(p0) >= 8 && len(p1) >= 8 {
			a, b := binary.LittleEndian.Uint64(p0[:8]), binary.LittleEndian.Uint64(p1[:8])
			binary.LittleEndian.PutUint64(d[:8], spreadBytes(uint32(a))|spreadBytes(uint32(b))<<8)
			binary.LittleEndian.PutUint64(d[8:16], spreadBytes(uint32(a>>32))|spreadBytes(uint32(b>>32))<<8)
			d, p0, p1 = d[16:], p0[8:], p1[8:]
		}
		for i := range p0 {
			d[2*i], d[2*i+1] = p0[i], p1[i]
		}
	case 4:
		p0, p1, p2, p3 := planes[0][:n], planes[1][:n], planes[2][:n], planes[3][:n]
		for i := range n {
			d := dst[4*i : 4*i+4 : 4*i+4]
			d[0], d[1], d[2], d[3] = p0[i], p1[i], p2[i], p3[i]
		}
	default:
		for i := range n {
			d := dst[i*width : i*width+width]
			for p := range d {
				d[p] = planes[p][i]
			}
		}
	}
}

// evenBytes packs bytes 0, 2, 4, 6 of x into a uint32.
func evenBytes(x uint64) uint32 {
	x &= 0x00ff00ff00ff00ff
	x = (x | x>>8) & 0x0000ffff0000ffff
	return uint32(x | x>>16)
}

// spreadBytes is evenBytes' inverse: byte k of v goes to byte 2k.
func spreadBytes(v uint32) uint64 {
	x := uint64(v)
	x = (x | x<<16) & 0x0000ffff0000ffff
	return (x | x<<8) & 0x00ff00ff00ff00ff
}

// splitPermuted is split with element i written at perm[i] of each plane.
func splitPermuted(src []byte, planes [][]byte, width int, perm []int32) {
	n := len(planes[0])
	perm = perm[:n]
	switch width {
	case 2:
		p0, p1, src := planes[0][:n], planes[1][:n], src[:2*n]
		for i, j := range perm {
			p0[j], p1[j] = src[2*i], src[2*i+1]
		}
	case 4:
		p0, p1, p2, p3, src := planes[0][:n], planes[1][:n], planes[2][:n], planes[3][:n], src[:4*n]
		for i, j := range perm {
			s := src[4*i : 4*i+4 : 4*i+4]
			p0[j], p1[j], p2[j], p3[j] = s[0], s[1], s[2], s[3]
		}
	default:
		for i, j := range perm {
			for p, b := range src[i*width : i*width+width] {
				planes[p][j] = b
			}
		}
	}
}

// joinPermuted is splitPermuted's inverse.
func joinPermuted(dst []byte, planes [][]byte, width int, perm []int32) {
	n := len(planes[0])
	perm = perm[:n]
	switch width {
	case 2:
		p0, p1, dst := planes[0][:n], planes[1][:n], dst[:2*n]
		for i, j := range perm {
			dst[2*i], dst[2*i+1] = p0[j], p1[j]
		}
	case 4:
		p0, p1, p2, p3, dst := planes[0][:n], planes[1][:n], planes[2][:n], planes[3][:n], dst[:4*n]
		for i, j := range perm {
			d := dst[4*i : 4*i+4 : 4*i+4]
			d[0], d[1], d[2], d[3] = p0[j], p1[j], p2[j], p3[j]
		}
	default:
		for i, j := range perm {
			d := dst[i*width : i*width+width]
			for p := range d {
				d[p] = planes[p][j]
			}
		}
	}
}

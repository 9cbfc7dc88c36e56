//go:build !purego

package bytegroup

import "unsafe"

// huffQuad is decode4's state, as its assembly reads and writes it: each
// stream's first byte, window position and bits read (huffStream), its
// next output offset in dst and the last one a round may start at.
type huffQuad struct {
	in    [4]*byte
	pos   [4]int
	c     [4]uint64
	o     [4]int
	hi    [4]int
	spill [2]uint64
}

//go:noescape
func decode4(t *[1 << huffLogMax]uint64, dst *byte, q *huffQuad)

// fast4 is fast4Go in assembly where BMI2 is there (havePairs): Go's
// variable shifts take CX, and its loop spilled the four streams'
// registers at every lookup.
func (d *huffDecoder) fast4(dst []byte, st *[4]huffStream, o, end *[4]int) {
	if !havePairs || len(dst) == 0 {
		d.fast4Go(dst, st, o, end)
		return
	}
	var q huffQuad
	for i := range st {
		if len(st[i].in) < 8 {
			return // no whole window: Go's loops do it all
		}
		q.in[i] = unsafe.SliceData(st[i].in)
		q.pos[i], q.c[i], q.o[i], q.hi[i] = st[i].pos, uint64(st[i].c), o[i], end[i]-16
	}
	decode4(&d.multi, unsafe.SliceData(dst), &q)
	for i := range st {
		st[i].pos, st[i].c, o[i] = q.pos[i], uint(q.c[i]), q.o[i]
	}
}

//go:noescape
func buildMulti(single *[1 << huffLogMax]uint16, multi *[1 << huffLogMax]uint64, cum *[1 << huffLogMax]uint16, i, step int)

// fill is fillGo in assembly where BMI2 is there.
func (d *huffDecoder) fill(i, step int) {
	if !havePairs {
		d.fillGo(i, step)
		return
	}
	buildMulti(&d.single, &d.multi, &d.cum, i, step)
}

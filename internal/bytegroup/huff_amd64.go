//go:build !purego

package bytegroup

import (
	"slices"

	"golang.org/x/sys/cpu"
)

// codePair (huff_amd64.s) codes two streams side by side: one stream's
// symbols wait on each other (each code's shift is the bit count after
// the one before), and the Go loop, one stream at a time, was a fifth of
// a repack's CPU. It needs BMI2's shifts; without them, one at a time.
var havePairs = cpu.X86.HasBMI2

// pairState is codePair's state, as its assembly reads and writes it.
type pairState struct {
	accA, nbA, accB, nbB uint64
	wroteA, wroteB       uint64
}

//go:noescape
func codePair(code *[256]uint32, a, b, oa, ob *byte, n int, st *pairState)

// pair appends the streams of a and b (b no longer than a, by at most a
// few symbols) and returns their lengths: codePair codes the last 4n
// symbols of each, finish the rest.
func (e *huffEncoder) pair(out, a, b []byte) ([]byte, int, int) {
	if !havePairs {
		return e.pairOneByOne(out, a, b)
	}
	n := len(b) / 4
	at := len(out)
	out = slices.Grow(out, room(len(a)))[:at+room(len(a))]
	e.buf = grow(e.buf, room(len(b)))
	var st pairState
	if n > 0 {
		codePair(&e.code, &a[len(a)-4*n], &b[len(b)-4*n], &out[at], &e.buf[0], n, &st)
	}
	la := e.finish(out[at:], int(st.wroteA), st.accA, uint(st.nbA), a[:len(a)-4*n])
	lb := e.finish(e.buf, int(st.wroteB), st.accB, uint(st.nbB), b[:len(b)-4*n])
	return append(out[:at+la], e.buf[:lb]...), la, lb
}

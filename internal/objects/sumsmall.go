package objects

import "sync"

// SmallMax is the longest message SumSmall hashes in a group: one BLAKE3
// chunk. Longer ones are hashed by Sum, one at a time.
const SmallMax = 1024

// sumGroups reports whether SumSmall hashes eight messages at once
// (sum8, AVX2 on amd64). Tests turn it off to test the loop of Sum.
var sumGroups = haveSum8

// SumSmall sets out[i] = Sum(msgs[i]) for each message. Up to eight
// messages of at most SmallMax bytes are hashed side by side: a model of
// many small tensors is hashed one small blob after another, and one
// BLAKE3 of a one-chunk message is one block at a time on one lane.
func SumSmall(msgs [][]byte, out []Digest) {
	out = out[:len(msgs)]
	if !sumGroups {
		for i, m := range msgs {
			out[i] = Sum(m)
		}
		return
	}
	var g *sumGroup
	for i := 0; i < len(msgs); {
		// The next (up to) eight short messages; a long one on its own.
		n, blocks := 0, 1
		var at [8]int
		for ; i < len(msgs) && n < 8; i++ {
			m := msgs[i]
			if len(m) > SmallMax {
				out[i] = Sum(m)
				continue
			}
			at[n] = i
			n++
			blocks = max(blocks, (len(m)+63)/64)
		}
		if n < 3 { // a pass of eight lanes costs about two Sums of 512 bytes
			for _, k := range at[:n] {
				out[k] = Sum(msgs[k])
			}
			continue
		}
		if g == nil {
			g = groupPool.Get().(*sumGroup)
			defer groupPool.Put(g)
		}
		g.sum(msgs, at[:n], blocks)
		for lane, k := range at[:n] {
			out[k] = g.out[lane]
		}
	}
}

// sumGroup is sum8's memory: the assembly reads only in, lens and writes
// only out, so it stays within the messages' copies whatever they are.
type sumGroup struct {
	in   [8][SmallMax]byte
	lens [8]uint32
	out  [8]Digest
}

var groupPool = sync.Pool{New: func() any { return new(sumGroup) }}

// sum hashes msgs[k] for each k of at (at most 8, each at most SmallMax
// bytes, none over blocks blocks) into g.out.
func (g *sumGroup) sum(msgs [][]byte, at []int, blocks int) {
	if blocks < 1 || blocks > SmallMax/64 || len(at) > len(g.lens) {
		panic("objects: sum8 outside its buffers") // sum8 reads 64·blocks bytes a lane
	}
	for lane := range g.lens {
		var m []byte
		if lane < len(at) {
			m = msgs[at[lane]]
		}
		n := copy(g.in[lane][:], m)
		// The last block's tail is zero (BLAKE3 pads with zeros), and an
		// empty message is one block of zeros. Unused lanes hash an empty
		// message and are dropped.
		clear(g.in[lane][n:max(64, (n+63)/64*64)])
		g.lens[lane] = uint32(n)
	}
	sum8(&g.in, &g.lens, blocks, &g.out)
}

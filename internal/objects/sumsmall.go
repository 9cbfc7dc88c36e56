package objects

import "sync"

// SmallMax is the longest message hashed in one lane of sum8: one BLAKE3
// chunk.
const SmallMax = 1024

// MediumMax is the longest message SumSmall hashes in sum8's lanes, a
// chunk a lane and then its parents, eight messages at once. Longer ones
// are hashed by Sum, one at a time, which from 8 KiB fills its own eight
// lanes. Below that Sum leaves lanes idle: BenchmarkSumSmall6K, 3.2 GB/s
// in lanes against 2.1 GB/s by Sum; 2K, 3.1 against 0.67 GB/s.
const MediumMax = 8 * SmallMax

// sumGroups reports whether SumSmall hashes eight messages at once
// (sum8, AVX2 on amd64). Tests turn it off to test the loop of Sum.
var sumGroups = haveSum8

// BLAKE3's domain flags.
const (
	flagChunkStart = 1 << iota
	flagChunkEnd
	flagParent
	flagRoot
)

// laneFlags says what sum8 compresses each lane as (sum8_amd64.s reads
// its 96 bytes): a chunk, with its index in its message as the counter,
// or a parent (counter 0); the flags of its first and of its last block.
type laneFlags struct {
	counter [8]uint32
	first   [8]uint32
	last    [8]uint32
}

// rootChunks is eight messages of one chunk each, each its own root.
var rootChunks = func() (l laneFlags) {
	for i := range l.first {
		l.first[i], l.last[i] = flagChunkStart, flagChunkEnd|flagRoot
	}
	return l
}()

// SumSmall sets out[i] = Sum(msgs[i]) for each message. Messages of at
// most MediumMax bytes are hashed eight at a time in sum8's lanes: a model
// of many small tensors is hashed one small blob after another, and one
// BLAKE3 of a short message leaves most of the vector unit idle.
func SumSmall(msgs [][]byte, out []Digest) {
	out = out[:len(msgs)]
	if !sumGroups {
		for i, m := range msgs {
			out[i] = Sum(m)
		}
		return
	}
	var g *sumGroup
	group := func() *sumGroup {
		if g == nil {
			g = groupPool.Get().(*sumGroup)
		}
		return g
	}
	defer func() {
		if g != nil {
			groupPool.Put(g)
		}
	}()
	var small, medium []int
	var smallAt, mediumAt [8]int
	small, medium = smallAt[:0], mediumAt[:0]
	flushSmall := func() {
		if len(small) < 3 { // a pass of eight lanes costs about two Sums of 512 bytes
			for _, k := range small {
				out[k] = Sum(msgs[k])
			}
		} else {
			g := group()
			g.sum(msgs, small)
			for lane, k := range small {
				out[k] = g.out[lane]
			}
		}
		small = small[:0]
	}
	flushMedium := func() {
		if len(medium) == 1 { // alone, its chunks fill no more lanes than Sum's
			out[medium[0]] = Sum(msgs[medium[0]])
		} else if len(medium) > 1 {
			group().sumMedium(msgs, medium, out)
		}
		medium = medium[:0]
	}
	for i, m := range msgs {
		switch {
		case len(m) <= SmallMax:
			if small = append(small, i); len(small) == 8 {
				flushSmall()
			}
		case len(m) <= MediumMax:
			if medium = append(medium, i); len(medium) == 8 {
				flushMedium()
			}
		default:
			out[i] = Sum(m)
		}
	}
	flushSmall()
	flushMedium()
}

// sumGroup is sum8's memory: the assembly reads only in and lens (and
// the lanes' flags) and writes only out, so it stays within the messages'
// copies whatever they are.
type sumGroup struct {
	in   [8][SmallMax]byte
	lens [8]uint32
	out  [8]Digest
	// cvs holds, for sumMedium, each message's chaining values: of its
	// chunks, then of each level of parents above them.
	cvs [8][MediumMax / SmallMax]Digest
}

var groupPool = sync.Pool{New: func() any { return new(sumGroup) }}

// sum hashes msgs[k] for each k of at (at most 8, each at most SmallMax
// bytes) into g.out.
func (g *sumGroup) sum(msgs [][]byte, at []int) {
	if len(at) > len(g.lens) {
		panic("objects: sum takes up to eight messages")
	}
	blocks := 1
	for lane := range g.lens {
		var m []byte
		if lane < len(at) {
			m = msgs[at[lane]]
		}
		blocks = max(blocks, g.load(lane, m))
	}
	g.run(blocks, &rootChunks)
}

// load copies m (at most SmallMax bytes) into lane and returns its count
// of blocks. The last block's tail is zero (BLAKE3 pads with zeros), and
// an empty message is one block of zeros; an unused lane hashes an empty
// message, which is dropped.
func (g *sumGroup) load(lane int, m []byte) int {
	n := copy(g.in[lane][:], m)
	if n != len(m) {
		panic("objects: a lane of sum8 takes one chunk")
	}
	blocks := max(1, (n+63)/64)
	clear(g.in[lane][n : 64*blocks])
	g.lens[lane] = uint32(n)
	return blocks
}

func (g *sumGroup) run(blocks int, lanes *laneFlags) {
	if blocks < 1 || blocks > SmallMax/64 {
		panic("objects: sum8 outside its buffers") // sum8 reads 64·blocks bytes a lane
	}
	sum8(&g.in, &g.lens, blocks, lanes, &g.out)
}

// sumMedium sets out[k] to the digest of msgs[k] for each k of at (at
// most 8 messages, each of SmallMax+1 to MediumMax bytes): their chunks'
// chaining values eight lanes at a time, then each level of parents, the
// pairs of every message side by side. Pairing a level's values from the
// left and carrying an odd last one up is BLAKE3's tree, whose left
// subtrees are whole powers of two; the pair of the last level is the
// root.
func (g *sumGroup) sumMedium(msgs [][]byte, at []int, out []Digest) {
	if len(at) > len(g.cvs) {
		panic("objects: sumMedium takes up to eight messages")
	}
	var n [8]int // values of each message at the current level
	var lanes laneFlags
	var dst [8]*Digest
	used, blocks := 0, 1
	flush := func() {
		for lane := used; lane < 8; lane++ {
			g.load(lane, nil)
		}
		g.run(blocks, &lanes)
		for lane, d := range dst[:used] {
			*d = g.out[lane]
		}
		used, blocks = 0, 1
	}
	// put takes data (a chunk, or a parent's two values) into the next
	// lane, whose chaining value goes to to.
	put := func(data []byte, counter, first, last uint32, to *Digest) {
		blocks = max(blocks, g.load(used, data))
		lanes.counter[used], lanes.first[used], lanes.last[used] = counter, first, last
		dst[used] = to
		if used++; used == 8 {
			flush()
		}
	}
	for k, i := range at {
		m := msgs[i]
		n[k] = (len(m) + SmallMax - 1) / SmallMax
		for c := range n[k] {
			put(m[c*SmallMax:min(len(m), (c+1)*SmallMax)], uint32(c), flagChunkStart, flagChunkEnd, &g.cvs[k][c])
		}
	}
	if used > 0 {
		flush()
	}
	for more := true; more; {
		more = false
		for k, i := range at {
			last := uint32(flagParent)
			if n[k] == 2 {
				last |= flagRoot
			}
			for j := range n[k] / 2 {
				var pair [64]byte
				copy(pair[:32], g.cvs[k][2*j][:])
				copy(pair[32:], g.cvs[k][2*j+1][:])
				to := &g.cvs[k][j] // below every pair still to be read
				if n[k] == 2 {
					to = &out[i]
				}
				put(pair[:], 0, 0, last, to)
			}
		}
		if used > 0 {
			flush()
		}
		for k := range at {
			if n[k]%2 == 1 && n[k] > 1 {
				g.cvs[k][n[k]/2] = g.cvs[k][n[k]-1] // carried up: its pairs are done
			}
			n[k] = (n[k] + 1) / 2
			more = more || n[k] > 1
		}
	}
}

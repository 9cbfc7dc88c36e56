package testmodel

import (
	"encoding/binary"
	"math"
	"math/rand/v2"

	"github.com/mstore/mstore/internal/formats"
)

// FineTunedBF16 is a fill for Spec.BuildWith: BF16 weights ~N(0, 0.02)
// drawn from seed (the same for every ft), and, when ft > 0, the low
// mantissa bits of a third of the elements of every tensor changed, as a
// small update does: a base and its fine-tunes for the coding tests.
func FineTunedBF16(seed, ft uint64) func(i int, t formats.Tensor, b []byte) {
	return func(i int, _ formats.Tensor, b []byte) {
		r := rand.New(rand.NewPCG(uint64(i), seed))
		for j := 0; j+1 < len(b); j += 2 {
			binary.LittleEndian.PutUint16(b[j:], uint16(math.Float32bits(float32(r.NormFloat64()*0.02))>>16))
		}
		if ft > 0 {
			f := rand.New(rand.NewPCG(ft, uint64(i)))
			for j := 0; j+1 < len(b); j += 2 {
				if f.IntN(3) == 0 {
					b[j] ^= byte(1 + f.IntN(3))
				}
			}
		}
	}
}

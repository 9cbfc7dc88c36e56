package objects

import (
	"math/rand/v2"
	"testing"

	"github.com/zeebo/blake3"
)

// withGroups runs f with SumSmall's eight-at-once path, where the CPU has
// it, and with the loop of Sum.
func withGroups(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	was := sumGroups
	defer func() { sumGroups = was }()
	for _, on := range []bool{true, false} {
		if on && !haveSum8 {
			continue
		}
		sumGroups = on
		name := "loop"
		if on {
			name = "groups"
		}
		t.Run(name, f)
	}
}

// checkSums fails unless SumSmall(msgs) is blake3.Sum256 of each.
func checkSums(t *testing.T, msgs [][]byte) {
	t.Helper()
	out := make([]Digest, len(msgs)+1) // one more: SumSmall writes only len(msgs)
	SumSmall(msgs, out)
	for i, m := range msgs {
		if want := Digest(blake3.Sum256(m)); out[i] != want {
			t.Fatalf("message %d of %d (%d bytes): %s, want %s", i, len(msgs), len(m), out[i].Short(), want.Short())
		}
	}
	if !out[len(msgs)].IsZero() {
		t.Fatal("SumSmall wrote past its messages")
	}
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestSumSmallEveryLength(t *testing.T) {
	withGroups(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		buf := randBytes(r, 8*1100)
		// Eight of each length side by side, each from its own place.
		for n := 0; n <= SmallMax+1; n++ {
			msgs := make([][]byte, 8)
			for i := range msgs {
				msgs[i] = buf[i*1100 : i*1100+n]
			}
			checkSums(t, msgs)
		}
	})
}

func TestSumSmallMixes(t *testing.T) {
	withGroups(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 4))
		for round := 0; round < 2000; round++ {
			msgs := make([][]byte, r.IntN(20))
			for i := range msgs {
				n := r.IntN(SmallMax + 1)
				switch r.IntN(8) {
				case 0:
					n = 0
				case 1:
					n = SmallMax + r.IntN(3000) // hashed on its own
				case 2:
					n = 64 * r.IntN(17) // whole blocks
				}
				msgs[i] = randBytes(r, n)
			}
			checkSums(t, msgs)
		}
	})
}

func TestSumSmallOneLaneEmpty(t *testing.T) {
	withGroups(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(5, 6))
		for empty := 0; empty < 8; empty++ {
			msgs := make([][]byte, 8)
			for i := range msgs {
				if i != empty {
					msgs[i] = randBytes(r, 1+r.IntN(SmallMax))
				}
			}
			checkSums(t, msgs)
			msgs[empty] = []byte{} // empty, not nil
			checkSums(t, msgs)
		}
	})
}

func TestSumSmallFewerThanEight(t *testing.T) {
	withGroups(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(7, 8))
		for n := 0; n < 8; n++ {
			msgs := make([][]byte, n)
			for i := range msgs {
				msgs[i] = randBytes(r, r.IntN(SmallMax+1))
			}
			checkSums(t, msgs)
		}
	})
}

func TestSumSmallSubSlices(t *testing.T) {
	withGroups(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(9, 10))
		buf := randBytes(r, 4096)
		var adjacent, overlapping [][]byte
		for at := 0; at+512 <= len(buf); at += 512 {
			adjacent = append(adjacent, buf[at:at+512])
		}
		for at := 0; at+700 <= len(buf); at += 300 {
			overlapping = append(overlapping, buf[at:at+700:at+700])
		}
		checkSums(t, adjacent)
		checkSums(t, overlapping)
		// The same bytes in every lane.
		checkSums(t, [][]byte{buf[:100], buf[:100], buf[:100], buf[:100], buf[:100], buf[:100], buf[:100], buf[:100]})
	})
}

func FuzzSumSmall(f *testing.F) {
	f.Add([]byte{}, []byte{0})
	f.Add(make([]byte, 4096), []byte{0, 1, 63, 64, 65, 255, 200, 128})
	f.Add([]byte("the quick brown fox"), []byte{3, 3, 3, 3, 3, 3, 3, 3, 3})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		// Each cut takes 4·c bytes (up to 1020) from where the last ended,
		// wrapping round data.
		msgs := make([][]byte, 0, len(cuts))
		at := 0
		for _, c := range cuts {
			n := min(4*int(c), len(data))
			if at+n > len(data) {
				at = 0
			}
			msgs = append(msgs, data[at:at+n])
			at += n
		}
		checkSums(t, msgs)
	})
}

func BenchmarkSumSmall512(b *testing.B) {
	msgs := make([][]byte, 1024)
	buf := randBytes(rand.New(rand.NewPCG(1, 1)), 512*len(msgs))
	for i := range msgs {
		msgs[i] = buf[512*i : 512*(i+1)]
	}
	out := make([]Digest, len(msgs))
	b.Run("SumSmall", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			SumSmall(msgs, out)
		}
	})
	b.Run("Sum256", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			for i, m := range msgs {
				out[i] = blake3.Sum256(m)
			}
		}
	})
}

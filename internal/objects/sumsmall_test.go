package objects

import (
	"math/rand/v2"
	"slices"
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

// TestSumSmallMediumLengths: eight messages of each length past a chunk
// and up to MediumMax (hashed a chunk a lane, then their parents), every
// length near a chunk's end and every seventh between, and just past
// MediumMax (hashed by Sum).
func TestSumSmallMediumLengths(t *testing.T) {
	withGroups(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(11, 12))
		buf := randBytes(r, 8*(MediumMax+100))
		for n := SmallMax; n <= MediumMax+2; n++ {
			if c := n % SmallMax; c > 65 && c < SmallMax-65 && n%7 != 0 {
				continue
			}
			msgs := make([][]byte, 8)
			for i := range msgs {
				at := i * (MediumMax + 100)
				msgs[i] = buf[at : at+n]
			}
			checkSums(t, msgs)
			checkSums(t, msgs[:2]) // two: the fewest hashed in lanes
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
					n = SmallMax + r.IntN(MediumMax) // a chunk a lane, or past MediumMax and hashed on its own
				case 3:
					n = MediumMax - r.IntN(3)
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
	f.Add(make([]byte, 20000), []byte{143, 142, 156, 200, 255, 170, 185, 129, 150, 3})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		// Each cut takes 4·c bytes (up to 508) for c under 128, else
		// 72·(c-128) (up to 9144, past MediumMax), from where the last
		// ended, wrapping round data.
		msgs := make([][]byte, 0, len(cuts))
		at := 0
		for _, c := range cuts {
			n := 4 * int(c)
			if c >= 128 {
				n = 72 * int(c-128)
			}
			n = min(n, len(data))
			if at+n > len(data) {
				at = 0
			}
			msgs = append(msgs, data[at:at+n])
			at += n
		}
		checkSums(t, msgs)
	})
}

func BenchmarkSumSmall512(b *testing.B) { benchSumSmall(b, 512) }

// BenchmarkSumSmall2K and 6K: messages hashed a chunk a lane, then their
// parents (the experts of bench/genmodel's MoE are 6 KiB).
func BenchmarkSumSmall2K(b *testing.B) { benchSumSmall(b, 2048) }
func BenchmarkSumSmall6K(b *testing.B) { benchSumSmall(b, 6144) }

func benchSumSmall(b *testing.B, size int) {
	msgs := make([][]byte, 1<<19/size)
	buf := randBytes(rand.New(rand.NewPCG(1, 1)), size*len(msgs))
	for i := range msgs {
		msgs[i] = buf[size*i : size*(i+1)]
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

// FirstMismatch finds the first message that does not hash to its digest,
// wherever it lies: in the first or a later group of SumSmall's, among
// short and long messages; -1 when every one does.
func TestFirstMismatch(t *testing.T) {
	var msgs [][]byte
	var want []Digest
	for i := range 700 { // past two groups of mismatchGroup
		n := []int{0, 1, 512, 1024, 1025, 6000, 70_000}[i%7]
		m := make([]byte, n)
		for k := range m {
			m[k] = byte(i * (k + 3))
		}
		msgs, want = append(msgs, m), append(want, Sum(m))
	}
	if i, _ := FirstMismatch(msgs, want); i != -1 {
		t.Fatalf("FirstMismatch of matching messages = %d, want -1", i)
	}
	for _, bad := range []int{0, 5, 255, 256, 300, 699} {
		for _, alsoLater := range []bool{false, true} {
			w := slices.Clone(want)
			w[bad][0] ^= 1
			if alsoLater && bad+1 < len(w) {
				w[len(w)-1][31] ^= 1
			}
			i, got := FirstMismatch(msgs, w)
			if i != bad || got != want[bad] {
				t.Fatalf("digest %d wrong: FirstMismatch = %d, %s; want %d, %s", bad, i, got.Short(), bad, want[bad].Short())
			}
		}
	}
}

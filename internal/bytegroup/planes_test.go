package bytegroup

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// The assembly split and join (where there is one) give the Go loops'
// planes and bytes for every width and length, the lengths around its
// 16-element steps included, and write nothing past the elements.
func TestSplitJoinMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, width := range []int{1, 2, 4, 8} {
		for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 33, 100, 4096, 65536 + 7} {
			src := make([]byte, n*width+width-1) // a short tail, which split leaves
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			want, got := make([][]byte, width), make([][]byte, width)
			for p := range width {
				want[p] = make([]byte, n)
				got[p] = make([]byte, n+1) // one guard byte past the plane
				got[p][n] = 0xA5
				got[p] = got[p][:n]
			}
			splitGo(src, want, width)
			split(src, got, width)
			for p := range width {
				if !bytes.Equal(got[p], want[p]) || got[p][:n+1][n] != 0xA5 {
					t.Fatalf("width %d n %d: plane %d differs from the Go split's", width, n, p)
				}
			}
			whole := src[:n*width]
			if !joinEqual(whole, got, width) {
				t.Fatalf("width %d n %d: joinEqual refuses the planes of the bytes", width, n)
			}
			for _, at := range []int{0, n*width/2 + 1, n*width - 1} {
				if at < 0 || at >= len(whole) {
					continue
				}
				whole[at] ^= 0x10
				if joinEqual(whole, got, width) {
					t.Fatalf("width %d n %d: joinEqual takes bytes with byte %d flipped", width, n, at)
				}
				whole[at] ^= 0x10
			}
			back := bytes.Repeat([]byte{0x5A}, len(src)+1)
			join(back, got, width)
			if !bytes.Equal(back[:n*width], src[:n*width]) || !bytes.Equal(back[n*width:], bytes.Repeat([]byte{0x5A}, len(back)-n*width)) {
				t.Fatalf("width %d n %d: join does not give the elements back, or writes past them", width, n)
			}
		}
	}
}

// Matches takes exactly the raw bytes a coding decodes to: a byte flipped
// anywhere (in a coded plane, a raw plane, the tail) is ErrMismatch, a
// corrupt or delta coding is ErrCorrupt, for every width.
func TestMatches(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, width := range []int{1, 2, 4, 8} {
		for _, n := range []int{0, 1, 1000, 3*blockSize + 5} {
			raw := bf16(n)
			if width == 8 || n%3 == 1 {
				for i := range raw[:n/2] {
					raw[i] = byte(r.Uint32()) // incompressible: a raw plane
				}
			}
			enc := Encode(raw, width)
			buf, err := Matches(nil, enc, raw)
			if err != nil {
				t.Fatalf("width %d n %d: %v", width, n, err)
			}
			for _, at := range []int{0, 1, n / 3, n / 2, n - 2, n - 1} {
				if at < 0 || at >= n {
					continue
				}
				raw[at] ^= 1
				if buf, err = Matches(buf, enc, raw); !errors.Is(err, ErrMismatch) {
					t.Fatalf("width %d n %d: byte %d flipped: %v, want ErrMismatch", width, n, at, err)
				}
				raw[at] ^= 1
			}
			if _, err := Matches(nil, enc, raw[:max(n-1, 0)]); n > 0 && err == nil {
				t.Fatalf("width %d n %d: a shorter raw matches", width, n)
			}
			if n > 0 && (width == 2 || width == 4) { // coded with a context
				if _, err := Matches(nil, EncodeDelta(raw, raw, width), raw); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("width %d n %d: a delta: %v, want ErrCorrupt", width, n, err)
				}
			}
		}
	}
}

// splitSampled splits as split does and says of every block of both
// planes what sampled says, at lengths around the 16 elements of a step,
// the 16 KiB under which a block is not sampled and the block size.
func TestSplitSampledIsSplitAndSampled(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, n := range []int{0, 1, 15, 16, 17, 16<<10 - 1, 16 << 10, 16<<10 + 17, blockSize - 1, blockSize, blockSize + 15, 3*blockSize + 16<<10 + 5} {
		src := make([]byte, 2*n)
		for i := range src {
			src[i] = byte(r.ExpFloat64() * float64(1+i%2*20))
		}
		c := &coder{bs: blockSize}
		planes := c.planesFor(n, 2)
		c.splitSampled(src, planes, 2)
		want := [][]byte{make([]byte, n), make([]byte, n)}
		split(src, want, 2)
		for p := range 2 {
			if !bytes.Equal(planes[p], want[p]) {
				t.Fatalf("n %d: plane %d differs from split's", n, p)
			}
			if got := len(c.pre[p]); got != (n+blockSize-1)/blockSize {
				t.Fatalf("n %d: %d blocks sampled, want %d", n, got, (n+blockSize-1)/blockSize)
			}
			for b, s := range c.pre[p] {
				e, top := sampled(want[p][b*blockSize : min((b+1)*blockSize, n)])
				if s.entropy != e || s.top != top {
					t.Fatalf("n %d plane %d block %d: sampled (%v, %v), splitSampled (%v, %v)", n, p, b, e, top, s.entropy, s.top)
				}
			}
		}
	}
}

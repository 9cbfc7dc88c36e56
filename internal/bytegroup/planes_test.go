package bytegroup

import (
	"bytes"
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
			back := bytes.Repeat([]byte{0x5A}, len(src)+1)
			join(back, got, width)
			if !bytes.Equal(back[:n*width], src[:n*width]) || !bytes.Equal(back[n*width:], bytes.Repeat([]byte{0x5A}, len(back)-n*width)) {
				t.Fatalf("width %d n %d: join does not give the elements back, or writes past them", width, n)
			}
		}
	}
}

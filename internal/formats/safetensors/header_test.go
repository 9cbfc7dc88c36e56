package safetensors

import (
	"fmt"
	"strings"
	"testing"
)

// The entries of one header share a backing array for their shapes: each
// shape is exactly its own dimensions, a scalar's is [] (not nil), and an
// append to one never writes into the next. Reading a header allocates a
// bounded number of times per tensor (its name, and amortized growth).
func TestHeaderEntries(t *testing.T) {
	var b strings.Builder
	b.WriteByte('{')
	const n = 2000
	var off int64
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		shape := []int64{}
		for d := range i % 4 {
			shape = append(shape, int64(d+2))
		}
		size := int64(4)
		for _, d := range shape {
			size *= d
		}
		dims := strings.Trim(strings.ReplaceAll(fmt.Sprint(shape), " ", ","), "[]")
		fmt.Fprintf(&b, `"t%d":{"dtype":"F32","shape":[%s],"data_offsets":[%d,%d]}`, i, dims, off, off+size)
		off += size
	}
	b.WriteByte('}')
	hdr := []byte(b.String())
	h, err := parseHeader("m.safetensors", hdr, off, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range h.tensors {
		var i int
		fmt.Sscanf(e.name, "t%d", &i)
		if len(e.shape) != i%4 || e.shape == nil || e.dtype != "F32" {
			t.Fatalf("tensor %s: shape %v (nil %v), dtype %q", e.name, e.shape, e.shape == nil, e.dtype)
		}
		for d, v := range e.shape {
			if v != int64(d+2) {
				t.Fatalf("tensor %s: shape %v", e.name, e.shape)
			}
		}
		if cap(e.shape) != len(e.shape) {
			t.Fatalf("tensor %s: shape has room for %d dimensions: an append would overwrite the next", e.name, cap(e.shape))
		}
	}
	allocs := testing.AllocsPerRun(3, func() {
		if _, err := parseHeader("m.safetensors", hdr, off, nil); err != nil {
			t.Fatal(err)
		}
	})
	if perTensor := allocs / n; perTensor > 2 {
		t.Errorf("%.2f allocations per tensor, want at most 2 (its name and amortized growth)", perTensor)
	}
	t.Logf("%.2f allocations per tensor", allocs/n)
}

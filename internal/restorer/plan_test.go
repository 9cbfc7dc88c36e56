package restorer

import (
	"testing"
	"unsafe"
)

// A re-layout of 100,000 small tensors holds 300,000 pieces through its
// writes: each byte of a piece is 300 KB of its peak.
func TestPieceSize(t *testing.T) {
	if n := unsafe.Sizeof(piece{}); n > 48 {
		t.Errorf("a piece is %d bytes, want at most 48", n)
	}
}

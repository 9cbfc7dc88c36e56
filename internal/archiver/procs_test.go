package archiver

import (
	"runtime"
	"testing"
)

// Adds that overlap add their Ps up, and GOMAXPROCS is what it was once
// the last of them has ended, whatever the order they end in.
func TestAddProcsNests(t *testing.T) {
	base := runtime.GOMAXPROCS(0)
	first := addProcs(4)
	second := addProcs(2)
	if n := runtime.GOMAXPROCS(0); n != base+6 {
		t.Errorf("two adds at once: GOMAXPROCS %d, want %d", n, base+6)
	}
	first()
	if n := runtime.GOMAXPROCS(0); n != base+2 {
		t.Errorf("the first add ended: GOMAXPROCS %d, want %d", n, base+2)
	}
	second()
	if n := runtime.GOMAXPROCS(0); n != base {
		t.Errorf("both ended: GOMAXPROCS %d, want %d", n, base)
	}
}

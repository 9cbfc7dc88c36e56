package gcpace

import (
	"runtime/debug"
	"testing"
)

// Raise holds the building target while any checkout holds it,
// and the last release, however often it is called, gives back the
// setting from before; a process that set a lazier one keeps it.
func TestRaiseGCPercentRestores(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	a := Raise()
	b := Raise()
	if got := debug.SetGCPercent(buildingGCPercent); got != buildingGCPercent {
		t.Fatalf("while held: GC percent %d", got)
	}
	a()
	a() // a second release of one hold changes nothing
	if got := debug.SetGCPercent(buildingGCPercent); got != buildingGCPercent {
		t.Fatalf("one of two released: GC percent %d", got)
	}
	b()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("all released: GC percent %d, want 100", got)
	}
	debug.SetGCPercent(-1)
	c := Raise()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("GC off, held: GC percent %d", got)
	}
	c()
	if got := debug.SetGCPercent(100); got != -1 {
		t.Fatalf("GC off, released: GC percent %d", got)
	}
}

// Tighten holds the tight target, over a Raise held at the same time and
// after it is released; the last release of either gives back the
// setting from before. A tighter setting, or the collector off, is kept.
func TestTightenOverRaise(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	percent := func() int { p := debug.SetGCPercent(100); debug.SetGCPercent(p); return p }
	raise := Raise()
	tight := Tighten()
	if got := percent(); got != tightGCPercent {
		t.Fatalf("raised and tightened: GC percent %d, want %d", got, tightGCPercent)
	}
	raise()
	if got := percent(); got != tightGCPercent {
		t.Fatalf("tightened, raise released: GC percent %d, want %d", got, tightGCPercent)
	}
	raise = Raise()
	tight()
	if got := percent(); got != buildingGCPercent {
		t.Fatalf("tighten released, raised: GC percent %d, want %d", got, buildingGCPercent)
	}
	raise()
	if got := percent(); got != 100 {
		t.Fatalf("all released: GC percent %d, want 100", got)
	}
	for _, before := range []int{20, -1} {
		debug.SetGCPercent(before)
		tight := Tighten()
		if got := percent(); got != before {
			t.Fatalf("GC percent %d before, tightened: %d", before, got)
		}
		tight()
	}
}

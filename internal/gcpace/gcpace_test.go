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

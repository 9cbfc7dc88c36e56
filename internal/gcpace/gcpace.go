// Package gcpace sets the garbage collector's target for a stretch of a
// command: higher while it builds what it keeps (an add's parse, a
// checkout's plan), where a collection at each doubling of a heap that is
// all live marks it again for nothing; lower while a command makes garbage
// beside a large live set (a re-layout's plan, gc's marks and prints),
// where each doubling of the heap is peak memory.
package gcpace

import (
	"runtime/debug"
	"sync"
)

// buildingGCPercent is the GC target while a command builds what it keeps
// to its end: a checkout's decoded manifest, plan and blob records, 60 MB
// live for 100,000 tensors and little garbage; an add's layout. At the default 100 a
// collection at each doubling of the heap marks all of it again, a fifth
// of the CPU time of such a checkout; at 400 the heap ends about the
// same size (what is built is live), with two collections instead of five.
const buildingGCPercent = 400

// tightGCPercent is the GC target while a re-layout plans, writes and
// parses back its files, and while gc runs (Tighten). A re-layout's plan
// of 100,000 small tensors is 60-90 MB live, and each tensor's frames,
// casts and parsed-back extents are garbage made beside it: at the
// default 100 the heap grew to twice the plan before a collection, peak
// RSS 150-170 MB for a GGUF or resharded SafeTensors and 290-310 MB for
// an npz or a PyTorch checkpoint; at 50 it is 125-140 and 220-270 MB, for
// 0-15% more time. gc on a store of 1.6 million blobs, half of them
// freed: 158-169 → 125-129 MB, 5-10% slower.
const tightGCPercent = 50

var gcPace struct {
	sync.Mutex
	raised, tight int // holds of each
	saved         int // the setting before the first hold
}

// Raise sets buildingGCPercent until release is called, unless a
// Tighten is held (memory first); commands running at once in one process
// (tests) share it, and the last release restores the setting that was
// there before the first hold.
func Raise() (release func()) { return hold(&gcPace.raised, buildingGCPercent) }

// Tighten sets tightGCPercent until release is called, over any Raise
// held; as Raise, the last release restores the setting from before.
func Tighten() (release func()) { return hold(&gcPace.tight, tightGCPercent) }

func hold(count *int, percent int) (release func()) {
	gcPace.Lock()
	if gcPace.raised+gcPace.tight == 0 {
		gcPace.saved = debug.SetGCPercent(percent) // apply corrects it
	}
	*count++
	apply()
	gcPace.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			gcPace.Lock()
			*count--
			apply()
			gcPace.Unlock()
		})
	}
}

// apply sets the target the holds ask for. A process with the collector
// off keeps it off, one with a lazier target than buildingGCPercent keeps
// it while raised, and one with a tighter target than tightGCPercent
// keeps it.
func apply() {
	saved, want := gcPace.saved, gcPace.saved
	switch {
	case saved < 0:
	case gcPace.tight > 0:
		want = min(saved, tightGCPercent)
	case gcPace.raised > 0:
		want = max(saved, buildingGCPercent)
	}
	debug.SetGCPercent(want)
}

// Package gcpace raises the garbage collector's target while a command
// builds what it keeps (an add's parse, a checkout's plan): a collection
// at each doubling of a heap that is all live marks it again for nothing.
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

var gcPace struct {
	sync.Mutex
	holders int
	saved   int
}

// Raise sets buildingGCPercent until release is called; commands
// running at once in one process (tests) share it, and the last restores
// the setting that was there before the first.
func Raise() (release func()) {
	gcPace.Lock()
	if gcPace.holders == 0 {
		gcPace.saved = debug.SetGCPercent(buildingGCPercent)
		if gcPace.saved < 0 || gcPace.saved > buildingGCPercent { // GC off, or already lazier
			debug.SetGCPercent(gcPace.saved)
		}
	}
	gcPace.holders++
	gcPace.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			gcPace.Lock()
			if gcPace.holders--; gcPace.holders == 0 {
				debug.SetGCPercent(gcPace.saved)
			}
			gcPace.Unlock()
		})
	}
}

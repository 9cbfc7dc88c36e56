package restorer

import (
	"runtime/debug"
	"sync"
)

// buildingGCPercent is the GC target while a checkout builds what it keeps
// to its end: the decoded manifest, the plan and the blob records, 60 MB
// live for 100,000 tensors and little garbage. At the default 100 a
// collection at each doubling of the heap marks all of it again, a fifth
// of the CPU time of such a checkout; at 400 the heap ends about the
// same size (what is built is live), with two collections instead of five.
const buildingGCPercent = 400

var gcPace struct {
	sync.Mutex
	holders int
	saved   int
}

// raiseGCPercent sets buildingGCPercent until release is called; checkouts
// running at once in one process (tests) share it, and the last restores
// the setting that was there before the first.
func raiseGCPercent() (release func()) {
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

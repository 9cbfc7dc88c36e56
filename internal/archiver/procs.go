package archiver

import (
	"runtime"
	"sync"
)

// A goroutine blocked in a write to a file keeps its P (the right to run
// Go code on a CPU) until the runtime's monitor takes it back, which it
// does tens of microseconds to milliseconds later; meanwhile a goroutine
// it woke waits in that P's queue. With as many Ps as CPUs, a base add's
// hashing waited so beside an idle CPU for 0.8 of its 1.9 s (runtime
// trace: a goroutine runnable, fewer than two running). An add's writers
// therefore get Ps of their own: the CPUs stay as many, and a blocked
// writer no longer takes one from the hashing.
var procs struct {
	mu          sync.Mutex
	base, added int
}

// addProcs raises GOMAXPROCS by n until the returned func is called.
// Adds that run at once (tests) add up; the last one out restores it.
func addProcs(n int) (restore func()) {
	procs.mu.Lock()
	defer procs.mu.Unlock()
	if procs.added == 0 {
		procs.base = runtime.GOMAXPROCS(0)
	}
	procs.added += n
	runtime.GOMAXPROCS(procs.base + procs.added)
	return func() {
		procs.mu.Lock()
		defer procs.mu.Unlock()
		procs.added -= n
		runtime.GOMAXPROCS(procs.base + procs.added)
	}
}

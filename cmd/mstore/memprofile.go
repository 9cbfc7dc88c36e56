package main

import (
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"time"
)

// startMemProfile writes a heap profile to path each time the live heap
// (as the last GC measured it) reaches a new high, so the file left at
// exit shows what was live at the peak rather than at the end, when most
// of it is garbage. For developers measuring mstore (MSTORE_MEMPROFILE);
// the returned stop writes one last profile if nothing did.
func startMemProfile(path string) (stop func()) {
	runtime.MemProfileRate = 64 << 10
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var peak uint64
	write := func() {
		if f, err := os.Create(path); err == nil {
			pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			metrics.Read(sample)
			// A new high by an eighth, so a slowly growing heap is not
			// written out at every tick.
			if live := sample[0].Value.Uint64(); live > peak+peak/8 {
				peak = live
				write()
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		if peak == 0 {
			write()
		}
	}
}

//go:build failpoints

package store

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

var failpoint = sync.OnceValues(func() (name, action string) {
	v := os.Getenv("MSTORE_FAILPOINT")
	name, action, _ = strings.Cut(v, ":")
	return name, action
})

var failpointFired atomic.Bool

// In a failpoints build MSTORE_INDEX_RANGE_BYTES sets rangeIndexBytes, so
// that a test's small index is cut into several ranges and the instants
// between their batches can be reached.
func init() {
	if n, err := strconv.ParseInt(os.Getenv("MSTORE_INDEX_RANGE_BYTES"), 10, 64); err == nil && n > 0 {
		rangeIndexBytes = n
	}
}

// Failpoint stops the process if MSTORE_FAILPOINT names point, the first
// time the process reaches it. Without the variable it costs a comparison.
func Failpoint(point string) {
	name, action := failpoint()
	if name == "" || name != point || failpointFired.Swap(true) {
		return
	}
	switch action {
	case "stop":
		// A signal to oneself is delivered asynchronously: wait for the
		// SIGCONT, so that nothing runs past the point before the stop.
		cont := make(chan os.Signal, 1)
		signal.Notify(cont, syscall.SIGCONT)
		defer signal.Stop(cont)
		fmt.Fprintf(os.Stderr, "mstore: failpoint %s: stopped (send SIGCONT to go on)\n", point)
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		<-cont
	default:
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way; run nothing else
	}
}

//go:build failpoints

package store

import (
	"fmt"
	"os"
	"os/signal"
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

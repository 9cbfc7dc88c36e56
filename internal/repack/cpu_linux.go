package repack

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) the process has used: what a
// repack's throughput a core is measured against, so that a machine busy
// with other work does not halve the figure.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

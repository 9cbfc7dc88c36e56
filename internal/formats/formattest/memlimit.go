package formattest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/mstore/mstore/internal/errs"
)

// memChildEnv names the test a child process runs under a memory limit.
const memChildEnv = "MSTORE_MEMLIMIT_CHILD"

// childMarker starts the line a child prints its outcome on.
const childMarker = "MSTORE-MEMLIMIT-RESULT "

// MemResult is how a function run under a memory limit ended.
type MemResult struct {
	// PeakRSS is the child process's peak resident set, in bytes
	// (getrusage's ru_maxrss): the test binary itself, the input it
	// generated and what fn built. Zero under the race detector (see
	// RaceEnabled), which runs the child without a limit.
	PeakRSS int64
	// Class is the class of fn's error ("" when fn returned nil); Message
	// its text.
	Class   string
	Message string
	// Crashed is set when the child did not return (out of memory under
	// the limit, a panic); Output then holds what it printed.
	Crashed bool
	Output  string
}

func (r MemResult) String() string {
	if r.Crashed {
		return fmt.Sprintf("crashed at peak RSS %d MiB: %.300s", r.PeakRSS>>20, r.Output)
	}
	if r.Class == "" {
		return fmt.Sprintf("succeeded at peak RSS %d MiB", r.PeakRSS>>20)
	}
	return fmt.Sprintf("%s at peak RSS %d MiB: %s", r.Class, r.PeakRSS>>20, r.Message)
}

// UnderMemoryLimit runs fn in a child process (this test binary, running
// only the calling test) whose address space is limited to asLimit bytes
// (RLIMIT_AS, as `prlimit --as` sets it), and reports how it ended and its
// peak RSS. Anything the test does before the call runs in both processes,
// so generate the input inside fn or keep it small. In the child the call
// never returns. Under the race detector the child runs without the limit
// and its peak is not reported.
func UnderMemoryLimit(t *testing.T, asLimit int64, fn func() error) MemResult {
	t.Helper()
	if os.Getenv(memChildEnv) == t.Name() {
		runChild(asLimit, fn)
	}
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	cmd := exec.Command(os.Args[0], "-test.run="+strings.Join(parts, "/"), "-test.count=1", "-test.timeout=60s")
	cmd.Env = append(os.Environ(), memChildEnv+"="+t.Name(), "GOTRACEBACK=single")
	out, err := cmd.CombinedOutput()
	var r MemResult
	if cmd.ProcessState != nil && !RaceEnabled {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.PeakRSS = ru.Maxrss << 10 // kilobytes on Linux
		}
	}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, childMarker); ok {
			var res struct{ Class, Message string }
			if json.Unmarshal([]byte(rest), &res) == nil && err == nil {
				r.Class, r.Message = res.Class, res.Message
				return r
			}
		}
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run the child test: %v", err)
	}
	r.Crashed, r.Output = true, string(out)
	return r
}

func runChild(asLimit int64, fn func() error) {
	lim := syscall.Rlimit{Cur: uint64(asLimit), Max: uint64(asLimit)}
	if !RaceEnabled {
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
			fmt.Fprintln(os.Stderr, "setrlimit:", err)
			os.Exit(3)
		}
	}
	err := fn()
	var res struct{ Class, Message string }
	if err != nil {
		res.Class, res.Message = errs.ClassOf(err).Key(), err.Error()
	}
	b, _ := json.Marshal(res)
	fmt.Printf("\n%s%s\n", childMarker, b)
	os.Exit(0)
}

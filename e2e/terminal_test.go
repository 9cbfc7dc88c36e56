package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// runOnTerminal runs mstore with stderr on a pseudo-terminal (as a person
// at a terminal has it) and stdout in a pipe, and returns both as written.
func runOnTerminal(t *testing.T, args ...string) (stdout, terminal string, code int) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("opening a pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 120})
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child holds it now: reads end with EIO when it exits
	var screen bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(&screen, ptmx)
		done <- err
	}()
	werr := cmd.Wait()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal output did not end")
	}
	var exit *exec.ExitError
	if errors.As(werr, &exit) {
		code = exit.ExitCode()
	} else if werr != nil {
		t.Fatal(werr)
	}
	return out.String(), screen.String(), code
}

// barFrame is one drawn frame: action, bar, percent, bytes done / total,
// rate (or --), ETA (or --).
var barFrame = regexp.MustCompile(`\r\x1b\[K(add|checkout) \[[=> ]{24}\] +\d+%  [\d.]+ [kMGT]?B / [\d.]+ [kMGT]?B  (--|[\d.]+ [kMGT]?B/s)  ETA (--|\d+:\d\d)`)

// TestProgressOnATerminal: the bar is drawn on a terminal with bytes done
// and total and an ETA field, and cleared at the end; it never appears with
// --quiet, --progress=none or in a pipe; with --json on a terminal stderr
// gets JSON status lines instead, and stdout still holds one JSON document.
func TestProgressOnATerminal(t *testing.T) {
	t.Parallel()
	src := smallModelDir(t, filepath.Join(t.TempDir(), "m"), 7)
	store := filepath.Join(t.TempDir(), "store")

	stdout, screen, code := runOnTerminal(t, "--store", store, "add", src, "--name", "m")
	if code != 0 || !barFrame.MatchString(screen) {
		t.Fatalf("add on a terminal: exit %d, no progress frame on the terminal:\n%q", code, screen)
	}
	if !strings.HasSuffix(strings.TrimSuffix(screen, lastNote(screen)), "\r\x1b[K") {
		t.Errorf("the bar is not cleared before the summary:\n%q", screen)
	}
	if !isDigest(strings.TrimSpace(stdout)) {
		t.Errorf("stdout %q is not the digest alone", stdout)
	}
	if _, screen, _ := runOnTerminal(t, "--store", store, "checkout", "m", filepath.Join(t.TempDir(), "out")); !strings.Contains(screen, "\r\x1b[Kcheckout [") {
		t.Errorf("checkout on a terminal draws no bar:\n%q", screen)
	}

	for _, quiet := range [][]string{{"-q"}, {"--progress=none"}, {"--progress", "none"}} {
		_, screen, code := runOnTerminal(t, append(append([]string{"--store", store}, quiet...), "add", src, "--name", "q")...)
		if code != 0 || strings.Contains(screen, "[") || (quiet[0] == "-q" && screen != "") {
			t.Errorf("%v on a terminal: exit %d, the terminal shows %q", quiet, code, screen)
		}
	}

	stdout, screen, code = runOnTerminal(t, "--store", store, "--json", "add", src, "--name", "j")
	if code != 0 {
		t.Fatalf("--json add: exit %d\n%s", code, screen)
	}
	var doc addResult
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || doc.Name != "j" {
		t.Errorf("--json stdout is not add's document: %v\n%s", err, stdout)
	}
	lines := jsonStatusLines(t, strings.ReplaceAll(screen, "\r\n", "\n"))
	if len(lines) < 2 || lines[len(lines)-1].Type != "summary" || lines[0].Type != "status" {
		t.Fatalf("--json on a terminal: status lines %+v, want status lines and a summary:\n%q", lines, screen)
	}
	if last := lines[len(lines)-1]; last.Action != "add" || last.BytesDone != last.BytesTotal || last.BytesTotal == 0 {
		t.Errorf("summary %+v: want all of add's bytes done", last)
	}
}

// TestProgressInAPipe: nothing in a pipe unless --progress=json asks; then
// every stderr line is a JSON status, for add, checkout, push and pull.
func TestProgressInAPipe(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	src := smallModelDir(t, filepath.Join(t.TempDir(), "m"), 8)
	if r := c.run("add", src, "--name", "m"); r.code != 0 || r.stderr != "" && strings.Contains(r.stderr, "[") {
		t.Fatalf("add in a pipe: %s", r)
	}
	remote := filepath.Join(t.TempDir(), "remote.mstore")
	other := newCLI(t)
	for _, tc := range []struct {
		c      *cli
		action string
		args   []string
	}{
		{c, "add", []string{"add", src, "--name", "n"}},
		{c, "checkout", []string{"checkout", "m", filepath.Join(t.TempDir(), "out")}},
		{c, "push", []string{"push", remote, "m"}},
		{other, "pull", []string{"pull", remote, "m"}},
	} {
		r := tc.c.run(append([]string{"--progress=json"}, tc.args...)...)
		if r.code != 0 {
			t.Fatalf("%s: %s", tc.action, r)
		}
		lines := jsonStatusLines(t, r.stderr)
		if len(lines) == 0 || lines[len(lines)-1].Type != "summary" || lines[len(lines)-1].Action != tc.action {
			t.Errorf("%s --progress=json: lines %+v\n%s", tc.action, lines, r)
		}
	}
}

type statusLine struct {
	Type       string  `json:"type"`
	Action     string  `json:"action"`
	BytesDone  int64   `json:"bytes_done"`
	BytesTotal int64   `json:"bytes_total"`
	Rate       float64 `json:"bytes_per_second"`
	ETA        float64 `json:"eta_seconds"`
}

// jsonStatusLines decodes every line of s, each of which must be a status.
func jsonStatusLines(t *testing.T, s string) []statusLine {
	t.Helper()
	var out []statusLine
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l == "" {
			continue
		}
		var st statusLine
		var raw map[string]any
		if err := json.Unmarshal([]byte(l), &raw); err != nil || json.Unmarshal([]byte(l), &st) != nil {
			t.Fatalf("stderr line %q is not a JSON status: %v", l, err)
		}
		for _, k := range []string{"type", "action", "bytes_done", "bytes_total", "percent_done", "bytes_per_second", "eta_seconds", "elapsed_seconds"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("status line %q lacks %q", l, k)
			}
		}
		out = append(out, st)
	}
	return out
}

// lastNote is the text after the last line clear: add's summary note.
func lastNote(screen string) string {
	i := strings.LastIndex(screen, "\r\x1b[K")
	if i < 0 {
		return ""
	}
	return screen[i+len("\r\x1b[K"):]
}

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStdoutWriteFails runs commands whose stdout cannot be written, a
// full disk (/dev/full) and a pipe whose reading end is closed: each must
// exit 1 with an io_error on stderr (as text, or as the JSON error with
// --json), never 0 with its output lost, and never die of SIGPIPE without
// a word.
func TestStdoutWriteFails(t *testing.T) {
	t.Parallel()
	dirs, _ := crashModels(t, t.TempDir(), 3)
	c := newCLI(t)
	c.add(dirs[0], "--name", "m", "--tag", "v0")
	c.add(dirs[1], "--name", "m")
	commands := [][]string{
		{"ls"}, {"--json", "ls"},
		{"show", "m"}, {"--json", "show", "m"},
		{"log", "m"}, {"--json", "log", "m"},
		{"du"}, {"--json", "du"},
		{"fsck"}, {"--json", "fsck"},
		{"diff", "m~1", "m"},
		{"add", "MODEL", "--name", "n"}, // prints the digest
		{"--json", "add", "MODEL", "--name", "n"},
		{"checkout", "m:v0", "DEST"},
		{"--help"},
	}
	stdouts := map[string]func(t *testing.T) *os.File{
		"/dev/full": func(t *testing.T) *os.File {
			f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			return f
		},
		"closed pipe": func(t *testing.T) *os.File {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			r.Close()
			return w
		},
	}
	for name, open := range stdouts {
		for i, args := range commands {
			args := append([]string{}, args...)
			for j, a := range args {
				switch a {
				case "DEST":
					args[j] = filepath.Join(t.TempDir(), "out")
				case "MODEL":
					args[j] = dirs[2]
				}
			}
			t.Run(name+"/"+strings.Join(commands[i], " "), func(t *testing.T) {
				out := open(t)
				defer out.Close()
				r := runWithStdout(t, out, append([]string{"--store", c.store}, args...)...)
				if r.code != 1 {
					t.Errorf("exit code %d, want 1 (io_error)\n%s", r.code, r)
				}
				if args[0] == "--json" {
					var e struct {
						Error struct{ Class, Message string }
					}
					if err := json.Unmarshal([]byte(r.stderr), &e); err != nil || e.Error.Class != "io_error" {
						t.Errorf("stderr is not a JSON io_error (%v)\n%s", err, r)
					}
				} else if !strings.Contains(r.stderr, "mstore: io_error: writing the output") {
					t.Errorf("stderr does not say the output could not be written\n%s", r)
				}
			})
		}
	}
}

// runWithStdout runs mstore with args and stdout, and fails the test if a
// signal ended it.
func runWithStdout(t *testing.T, stdout *os.File, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanEnv()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	err := cmd.Run()
	r := result{args: args, stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
		if r.code < 0 {
			t.Fatalf("mstore killed by a signal: %v\n%s", err, r)
		}
	default:
		t.Fatalf("running mstore: %v", err)
	}
	return r
}

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// walkthroughStep is one ```sh walkthrough block of the README and the
// ```json block after it, if any: what the block's command prints.
type walkthroughStep struct {
	line   int
	script string
	output string // "" when no JSON is documented
}

// readmeWalkthrough extracts the README's walkthrough, in order.
func readmeWalkthrough(t *testing.T) []walkthroughStep {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var steps []walkthroughStep
	lines := strings.Split(string(b), "\n")
	block := func(i int) (string, int) { // the block opening at line i, and the line after it
		var body []string
		for j := i + 1; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == "```" {
				return strings.Join(body, "\n"), j + 1
			}
			body = append(body, lines[j])
		}
		t.Fatalf("README.md:%d: a code block that does not end", i+1)
		return "", 0
	}
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```sh walkthrough" {
			continue
		}
		script, next := block(i)
		step := walkthroughStep{line: i + 1, script: script}
		if next < len(lines) && strings.TrimSpace(lines[next]) == "```json" {
			step.output, next = block(next)
		}
		steps = append(steps, step)
		i = next - 1
	}
	return steps
}

// TestReadmeWalkthrough runs the README's walkthrough verbatim, block by
// block, in a scratch directory with the repository's examples/ and
// mstore on PATH, and checks that every field a JSON output shows is in
// what the command printed (values differ: digests, times, paths).
func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	steps := readmeWalkthrough(t)
	if len(steps) < 15 {
		t.Fatalf("the README's walkthrough has %d steps: the ```sh walkthrough blocks were not found", len(steps))
	}
	root, _ := moduleRoot()
	work := t.TempDir()
	os.Symlink(filepath.Join(root, "examples"), filepath.Join(work, "examples"))
	binDir := t.TempDir()
	os.Symlink(bin, filepath.Join(binDir, "mstore"))
	state := filepath.Join(t.TempDir(), "state")
	os.WriteFile(state, nil, 0o644)
	env := append(cleanEnv(), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))

	documented := map[string]bool{}
	for _, st := range steps {
		// Each block runs in its own shell; what it exports is carried to
		// the next one, as in one terminal.
		script := fmt.Sprintf("set -euo pipefail\nsource %q\n%s\nexport -p > %q\n", state, st.script, state)
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir, cmd.Env = work, env
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("README.md:%d: %v\n%s\nstdout: %s\nstderr: %s", st.line, err, st.script, stdout.String(), stderr.String())
		}
		for _, f := range strings.Fields(st.script) {
			if f == "mstore" || strings.HasPrefix(f, "-") || documented[f] {
				continue
			}
			documented[f] = true
		}
		if st.output == "" {
			continue
		}
		var want, got any
		if err := json.Unmarshal([]byte(st.output), &want); err != nil {
			t.Fatalf("README.md:%d: the documented output is not JSON: %v\n%s", st.line, err, st.output)
		}
		if err := json.Unmarshal([]byte(stdout.String()), &got); err != nil {
			t.Fatalf("README.md:%d: %s printed no JSON document: %v\n%s", st.line, st.script, err, stdout.String())
		}
		for _, missing := range missingFields("", want, got) {
			t.Errorf("README.md:%d: %s: the documented field %s is not in the output:\n%s", st.line, st.script, missing, stdout.String())
		}
	}
	// Every command of `mstore --help` has its step (serve, completion
	// and man print no JSON and are shown in prose).
	help := execBin(t, bin, "", nil, "--help").stdout
	for _, cmd := range helpCommands(help) {
		switch cmd {
		case "serve", "completion", "man", "help":
			continue
		}
		if !documented[cmd] {
			t.Errorf("the README's walkthrough has no step running mstore %s", cmd)
		}
	}
}

// missingFields lists the key paths of want that got lacks. An array in
// want is a sample: each of its elements must match some element of got's.
func missingFields(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{path + " (not an object)"}
		}
		var out []string
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, ok := g[k]
			if !ok {
				out = append(out, path+"."+k)
				continue
			}
			out = append(out, missingFields(path+"."+k, w[k], gv)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok {
			return []string{path + " (not an array)"}
		}
		var out []string
		for i, we := range w {
			best := []string{fmt.Sprintf("%s[%d] (no element)", path, i)}
			for _, ge := range g {
				if m := missingFields(fmt.Sprintf("%s[%d]", path, i), we, ge); len(m) < len(best) {
					best = m
				}
			}
			out = append(out, best...)
		}
		return out
	}
	return nil
}

// helpCommands are the command names `mstore --help` lists.
func helpCommands(help string) []string {
	_, after, _ := strings.Cut(help, "COMMANDS:\n")
	body, _, _ := strings.Cut(after, "\n\n")
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			out = append(out, strings.TrimSuffix(f[0], ","))
		}
	}
	return out
}

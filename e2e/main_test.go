package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/testenv"
)

// bin is the mstore binary built once by TestMain, with failpoints
// (-tags failpoints) and without the race detector: most tests run it.
var bin string

// raceBin is bin built with -race when the suite runs with -race (else it
// is bin): the crash and concurrency tests run it (newRaceCLI), so that the
// race detector watches the real program under kills and parallel
// commands. Only those tests run it, as it is several times slower.
var raceBin string

// home is a scratch directory used as HOME and XDG_DATA_HOME, so that a
// command run without --store can never touch the user's own store.
var home string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "mstore-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	bin = filepath.Join(tmp, "mstore")
	home = filepath.Join(tmp, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if err := buildMstore(bin, "-tags", "failpoints"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	raceBin = bin
	if raceEnabled {
		raceBin = filepath.Join(tmp, "mstore-race")
		if err := buildMstore(raceBin, "-race", "-tags", "failpoints"); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
	}
	return m.Run()
}

// buildMstore runs `go build -o out flags... ./cmd/mstore` in the module.
func buildMstore(out string, flags ...string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	build := exec.Command("go", append(append([]string{"build", "-o", out}, flags...), "./cmd/mstore")...)
	build.Dir = root
	if msg, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s ./cmd/mstore: %v\n%s", strings.Join(flags, " "), err, msg)
	}
	return nil
}

// moduleRoot walks up from the working directory to the directory that
// holds go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// sharedTestdata returns the shared/testdata folder found by walking up from
// the module root's parent, or skips the test when there is none.
func sharedTestdata(t *testing.T, sub string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	for dir := filepath.Dir(root); ; dir = filepath.Dir(dir) {
		p := filepath.Join(dir, "shared", "testdata", sub)
		if info, err := os.Stat(p); err == nil && info.IsDir() {
			return p
		}
		if filepath.Dir(dir) == dir {
			testenv.Missing(t, "no shared/testdata/%s above %s: the real third-party files are not present in this checkout", sub, root)
		}
	}
}

// result is what one run of the binary produced.
type result struct {
	args   []string
	stdout string
	stderr string
	code   int
}

func (r result) String() string {
	return fmt.Sprintf("mstore %s\nexit %d\nstdout: %s\nstderr: %s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// cli runs a binary against one store.
type cli struct {
	t     *testing.T
	bin   string // bin or raceBin; "" is bin
	store string
}

// exe is the binary c runs.
func (c *cli) exe() string {
	if c.bin == "" {
		return bin
	}
	return c.bin
}

// newCLI returns a runner for a fresh, empty store directory (not yet
// created: the first add creates it).
func newCLI(t *testing.T) *cli {
	t.Helper()
	return &cli{t: t, store: filepath.Join(t.TempDir(), "store")}
}

// newRaceCLI is newCLI running raceBin: for the crash and concurrency
// tests.
func newRaceCLI(t *testing.T) *cli {
	t.Helper()
	c := newCLI(t)
	c.bin = raceBin
	return c
}

// execMstore runs mstore with args exactly as given (no --store added) and
// the extra environment variables env.
func execMstore(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return execMstoreIn(t, "", env, args...)
}

// execMstoreIn is execMstore in the working directory dir.
func execMstoreIn(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	return execBin(t, bin, dir, env, args...)
}

// execBin runs the binary exe with args in dir (the test's own working
// directory if "") and the extra environment env.
func execBin(t *testing.T, exe, dir string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(exe, args...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	requireNoRace(t, r.stderr)
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

// requireNoRace fails the test if the race detector reported a data race
// on an mstore process's stderr (a race binary reports and goes on, and
// exits 66 at the end, if it still gets there).
func requireNoRace(t *testing.T, stderr string) {
	t.Helper()
	if strings.Contains(stderr, "WARNING: DATA RACE") {
		t.Errorf("the race detector found a data race in mstore:\n%s", stderr)
	}
}

// cleanEnv is the test's environment without anything that could point
// mstore at another store. A race binary would sleep a second at exit
// (waiting for late reports) on every run: atexit_sleep_ms=0 removes that.
func cleanEnv() []string {
	var env []string
	gorace := "atexit_sleep_ms=0"
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "MSTORE_DIR", "XDG_DATA_HOME", "HOME":
			continue
		case "GORACE":
			gorace = v + " " + gorace
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, "xdg"), "GORACE="+gorace)
}

// run runs `mstore --store STORE args...`.
func (c *cli) run(args ...string) result {
	c.t.Helper()
	return execBin(c.t, c.exe(), "", nil, append([]string{"--store", c.store}, args...)...)
}

// ok runs a command that must succeed and returns its stdout.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("command failed:\n%s", r)
	}
	return r.stdout
}

// json runs a command with --json that must succeed and decodes its stdout
// into v.
func (c *cli) json(v any, args ...string) {
	c.t.Helper()
	r := c.run(append([]string{"--json"}, args...)...)
	if r.code != 0 {
		c.t.Fatalf("command failed:\n%s", r)
	}
	decodeStrict(c.t, r, v)
}

func decodeStrict(t *testing.T, r result, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("stdout is not the expected JSON: %v\n%s", err, r)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON document\n%s", r)
	}
}

// exitCodes maps each class key to the exit code the binary must use.
var exitCodes = func() map[string]int {
	m := map[string]int{}
	for _, c := range errs.Classes() {
		m[c.Key()] = c.ExitCode()
	}
	return m
}()

// fail runs a command that must fail with class, twice: with --json (the
// error must be {"error":{"class","message"}} on stderr, stdout empty) and
// without (the class key must be in the message on stderr). It returns the
// JSON error message.
func (c *cli) fail(class string, args ...string) string {
	c.t.Helper()
	code, ok := exitCodes[class]
	if !ok {
		c.t.Fatalf("test bug: unknown class %q", class)
	}
	r := c.run(append([]string{"--json"}, args...)...)
	if r.code != code {
		c.t.Errorf("exit code %d, want %d (%s)\n%s", r.code, code, class, r)
	}
	if r.stdout != "" {
		c.t.Errorf("stdout not empty on failure\n%s", r)
	}
	var e struct {
		Error struct {
			Class   string `json:"class"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stderr), &e); err != nil {
		c.t.Fatalf("stderr is not a JSON error: %v\n%s", err, r)
	}
	if e.Error.Class != class {
		c.t.Errorf("error class %q, want %q\n%s", e.Error.Class, class, r)
	}
	// The class is the JSON's "class"; the message says what happened,
	// without the class again or a package prefix.
	if strings.Contains(e.Error.Message, class+": ") || e.Error.Message == "" {
		c.t.Errorf("error message repeats its class %q (or is empty)\n%s", class, r)
	}

	r = c.run(args...)
	if r.code != code {
		c.t.Errorf("without --json: exit code %d, want %d (%s)\n%s", r.code, code, class, r)
	}
	if !strings.Contains(r.stderr, "mstore: "+class+": ") {
		c.t.Errorf("without --json: stderr lacks \"mstore: %s: \"\n%s", class, r)
	}
	if r.stdout != "" {
		c.t.Errorf("without --json: stdout not empty on failure\n%s", r)
	}
	return e.Error.Message
}

// addResult is `add --json`.
type addResult struct {
	Name         string   `json:"name"`
	Tag          string   `json:"tag"`
	Digest       string   `json:"digest"`
	Format       string   `json:"format"`
	Files        int      `json:"files"`
	Tensors      int      `json:"tensors"`
	LogicalBytes int64    `json:"logical_bytes"`
	NewBytes     int64    `json:"new_bytes"`
	NewBlobs     int      `json:"new_blobs"`
	Moved        bool     `json:"moved"`
	Warnings     []string `json:"warnings"`
}

// add runs `add --json PATH args...`.
func (c *cli) add(path string, args ...string) addResult {
	c.t.Helper()
	var res addResult
	c.json(&res, append([]string{"add", path}, args...)...)
	if !isDigest(res.Digest) {
		c.t.Fatalf("add printed digest %q, want 64 lowercase hex digits", res.Digest)
	}
	return res
}

// duResult is `du --json`.
type duResult struct {
	Versions     int     `json:"versions"`
	Blobs        int     `json:"blobs"`
	LogicalBytes int64   `json:"logical_bytes"`
	BlobBytes    int64   `json:"blob_bytes"`
	IndexBytes   int64   `json:"index_bytes"`
	StoredBytes  int64   `json:"stored_bytes"`
	DedupRatio   float64 `json:"dedup_ratio"`
}

func (c *cli) du() duResult {
	c.t.Helper()
	var u duResult
	c.json(&u, "du")
	return u
}

// showResult is `show --json`.
type showResult struct {
	Digest       string   `json:"digest"`
	LogicalBytes int64    `json:"logical_bytes"`
	Warnings     []string `json:"warnings"`
	Manifest     struct {
		Format string `json:"format"`
		Files  []struct {
			Path    string `json:"path"`
			Size    int64  `json:"size"`
			Digest  string `json:"digest"`
			Role    string `json:"role"`
			Extents []struct {
				Kind   string `json:"kind"`
				Size   int64  `json:"size"`
				Tensor int    `json:"tensor"`
				Data   *struct {
					Digest string   `json:"digest"`
					Chunks []string `json:"chunks"`
				} `json:"data"`
			} `json:"extents"`
		} `json:"files"`
		Tensors []struct {
			Name   string   `json:"name"`
			DType  string   `json:"dtype"`
			Shape  []int64  `json:"shape"`
			Size   int64    `json:"size"`
			Digest string   `json:"digest"`
			Chunks []string `json:"chunks"`
		} `json:"tensors"`
	} `json:"manifest"`
}

func (c *cli) show(ref string) showResult {
	c.t.Helper()
	var s showResult
	c.json(&s, "show", ref)
	return s
}

// tensorDigests maps tensor names to digests in a shown version.
func (s showResult) tensorDigests() map[string]string {
	m := map[string]string{}
	for _, t := range s.Manifest.Tensors {
		m[t.Name] = t.Digest
	}
	return m
}

func isDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// snapshot is what a store looks like from outside: its usage, its refs
// and the files under objects/ and tmp/.
type snapshot struct {
	du      duResult
	ls      string
	objects []string
	tmp     []string
}

func (c *cli) snapshot() snapshot {
	c.t.Helper()
	r := c.run("--json", "ls")
	if r.code != 0 {
		c.t.Fatalf("ls failed:\n%s", r)
	}
	return snapshot{du: c.du(), ls: r.stdout, objects: listFiles(c.t, filepath.Join(c.store, "objects")),
		tmp: listFiles(c.t, filepath.Join(c.store, "tmp"))}
}

// requireUnchanged fails unless the store looks as it did at before.
func (c *cli) requireUnchanged(before snapshot) {
	c.t.Helper()
	after := c.snapshot()
	if after.du != before.du {
		c.t.Errorf("du changed:\nbefore %+v\nafter  %+v", before.du, after.du)
	}
	if after.ls != before.ls {
		c.t.Errorf("ls changed:\nbefore %s\nafter  %s", before.ls, after.ls)
	}
	if !equalStrings(after.objects, before.objects) {
		c.t.Errorf("files under objects/ changed: %d before, %d after: %v", len(before.objects), len(after.objects),
			diffStrings(before.objects, after.objects))
	}
	if len(after.tmp) != 0 {
		c.t.Errorf("files left in the store's tmp/: %v", after.tmp)
	}
}

// listFiles returns the relative paths of the regular files under dir,
// sorted; a missing dir has none.
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == dir {
				return filepath.SkipDir
			}
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// diffStrings lists what is only in a (-) and only in b (+).
func diffStrings(a, b []string) []string {
	in := map[string]int{}
	for _, s := range a {
		in[s]--
	}
	for _, s := range b {
		in[s]++
	}
	var out []string
	for s, n := range in {
		switch {
		case n < 0:
			out = append(out, "-"+s)
		case n > 0:
			out = append(out, "+"+s)
		}
	}
	sort.Strings(out)
	return out
}

// requireSameTree fails unless directories a and b hold the same files with
// the same bytes.
func requireSameTree(t *testing.T, want, got string) {
	t.Helper()
	wantFiles, gotFiles := listFiles(t, want), listFiles(t, got)
	if !equalStrings(wantFiles, gotFiles) {
		t.Fatalf("files differ: %v", diffStrings(wantFiles, gotFiles))
	}
	for _, f := range wantFiles {
		requireSameFile(t, filepath.Join(want, f), filepath.Join(got, f))
	}
}

func requireSameFile(t *testing.T, want, got string) {
	t.Helper()
	a, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		i := 0
		for i < len(a) && i < len(b) && a[i] == b[i] {
			i++
		}
		t.Fatalf("%s differs from %s: %d vs %d bytes, first difference at byte %d", got, want, len(b), len(a), i)
	}
}

// dirEntries lists the names directly in dir.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/testenv"
)

// TestHelpAndVersion: `help`, `help CMD` work (they failed with "No help
// topic"), and `version` reports what the toolchain stamped in the binary
// (go version -m reads the same build info).
func TestHelpAndVersion(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, args := range [][]string{{"help"}, {"help", "add"}, {"add", "--help"}} {
		if out := c.ok(args...); !strings.Contains(out, "USAGE:") {
			t.Errorf("%v:\n%s", args, out)
		}
	}
	if out := c.ok("help", "checkout"); !strings.Contains(out, "EXAMPLES:") || !strings.Contains(out, "NAME~N") {
		t.Errorf("help checkout has no examples or version names:\n%s", out)
	}
	var v struct {
		Module, Version, Revision, Go string
		Modified                      bool
	}
	c.json(&v, "version")
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(info), "\tmod\t"+v.Module+"\t"+v.Version+"\t") || !strings.Contains(string(info), v.Go) {
		t.Errorf("version %+v disagrees with go version -m:\n%s", v, info)
	}
	if rev := buildSetting(string(info), "vcs.revision"); rev != v.Revision {
		t.Errorf("version says revision %q, the binary's build info %q", v.Revision, rev)
	}
	if out := c.ok("--version"); !strings.HasPrefix(out, "mstore version "+v.Version) {
		t.Errorf("--version: %q", out)
	}
	if testing.Short() {
		return
	}
	// A build with VCS stamping (the e2e binary is built without, as
	// GOFLAGS=-buildvcs=false here) names the commit it was built from.
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(root, ".git")); err == nil && !fi.IsDir() {
		// In a git worktree .git is a file, which the go command's VCS
		// detection does not look for (isDir in cmd/go/internal/vcs): there
		// is no stamp to compare; a clone (CI) checks it.
		t.Skip("a git worktree: go build does not stamp VCS information here") // choice: no stamp to check in a worktree
	}
	stamped := filepath.Join(t.TempDir(), "mstore")
	if err := buildMstore(stamped, "-buildvcs=true"); err != nil {
		t.Fatal(err)
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		testenv.Missing(t, "git rev-parse HEAD: %v (no git checkout to stamp)", err)
		return
	}
	r := execBin(t, stamped, "", nil, "--json", "version")
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Revision != strings.TrimSpace(string(head)) {
		t.Errorf("a -buildvcs=true build: version %+v (%v), want revision %s", v, err, head)
	}
	if out := execBin(t, stamped, "", nil, "--version").stdout; !strings.Contains(out, v.Revision) {
		t.Errorf("--version of a stamped build does not name its commit: %q", out)
	}
}

func buildSetting(info, key string) string {
	for _, l := range strings.Split(info, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], key+"=") {
			return strings.TrimPrefix(f[1], key+"=")
		}
	}
	return ""
}

// TestCompletionScripts: the bash script parses, registers a completion
// for mstore when sourced, and completes a command name by asking mstore;
// zsh and fish scripts parse in their shells; the man page renders.
func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := t.TempDir()
	os.Symlink(bin, filepath.Join(dir, "mstore"))
	path := dir + string(os.PathListSeparator) + os.Getenv("PATH")
	for _, sh := range []string{"bash", "zsh", "fish"} {
		script := filepath.Join(dir, "mstore."+sh)
		if err := os.WriteFile(script, []byte(c.ok("completion", sh)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := exec.LookPath(sh); err != nil {
			testenv.Missing(t, "%s is not installed (.ci/run installs it)", sh)
			continue
		}
		if out, err := exec.Command(sh, "-n", script).CombinedOutput(); err != nil {
			t.Errorf("%s -n on its completion script: %v\n%s", sh, err, out)
		}
	}
	probe := `source "$1"; complete -p mstore; COMP_WORDS=(mstore chec); COMP_CWORD=1; _mstore_complete; echo "words: ${COMPREPLY[*]}"`
	cmd := exec.Command("bash", "-c", probe, "bash", filepath.Join(dir, "mstore.bash"))
	cmd.Env = append(cleanEnv(), "PATH="+path)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "complete -o bashdefault -o default -F _mstore_complete mstore") ||
		!strings.Contains(string(out), "words: checkout") {
		t.Errorf("bash completion: %v\n%s", err, out)
	}
	if fish := c.ok("completion", "fish"); !strings.Contains(fish, "complete -c mstore") || !strings.Contains(fish, "checkout") {
		t.Errorf("fish completion lists no commands:\n%s", fish)
	}

	page := filepath.Join(dir, "mstore.1")
	os.WriteFile(page, []byte(c.ok("man")), 0o644)
	if _, err := exec.LookPath("man"); err != nil {
		testenv.Missing(t, "man (man-db) is not installed (.ci/run installs it)")
		return
	}
	man := exec.Command("man", "-l", page)
	man.Env = append(cleanEnv(), "MANPAGER=cat", "PAGER=cat", "MANWIDTH=100")
	rendered, err := man.CombinedOutput()
	if err != nil || !strings.Contains(string(rendered), "checkout") || !strings.Contains(string(rendered), "--store") || strings.Contains(string(rendered), "warning") {
		t.Errorf("man -l: %v\n%s", err, rendered)
	}
}

// TestInitRefusesAFullDirectory: init DIR or --store DIR on a directory
// that holds other files (a model directory) is a conflict and writes
// nothing there; an empty or new directory, or a store, is fine.
func TestInitRefusesAFullDirectory(t *testing.T) {
	t.Parallel()
	model := smallModelDir(t, filepath.Join(t.TempDir(), "m"), 3)
	before := dirEntries(t, model)
	c := &cli{t: t, store: model}
	msg := c.fail("conflict", "init", model)
	if !strings.Contains(msg, "not empty and not a store") || !strings.Contains(msg, "config.json") {
		t.Errorf("message %q", msg)
	}
	c.fail("conflict", "add", model) // --store MODEL, add's implicit init
	if got := dirEntries(t, model); !equalStrings(got, before) {
		t.Errorf("the refused init wrote into the directory: %v, was %v", got, before)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	os.Mkdir(empty, 0o755)
	c = &cli{t: t, store: empty}
	c.ok("init", empty)
	c.ok("init", empty) // a store already
	c.add(model)
}

// TestDidYouMean: an unknown command, ref or tag names the nearest ones.
func TestDidYouMean(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.add(smallModelDir(t, filepath.Join(t.TempDir(), "m"), 4), "--name", "llama-3b", "--tag", "v1")
	for _, tc := range []struct {
		class, want string
		args        []string
	}{
		{"schema_error", `unknown command "chekout"; did you mean "checkout"?`, []string{"chekout"}},
		{"not_found", `did you mean "llama-3b"?`, []string{"show", "llama3b"}},
		{"not_found", `did you mean "llama-3b"?`, []string{"log", "lama-3b"}},
		{"not_found", `did you mean "llama-3b:v1"?`, []string{"show", "llama-3b:v2"}},
		{"not_found", `did you mean "llama-3b:v1"?`, []string{"checkout", "lama-3b:v1", filepath.Join(t.TempDir(), "o")}},
		{"not_found", `did you mean "llama-3b:v1"?`, []string{"rm", "llama-3b:v01"}},
		{"not_found", `did you mean "llama-3b"?`, []string{"rm", "llama_3b"}},
	} {
		if msg := c.fail(tc.class, tc.args...); !strings.Contains(msg, tc.want) {
			t.Errorf("%v: %q, want %q", tc.args, msg, tc.want)
		}
	}
}

// TestRepeatedFlags: --tag takes several tags; a flag of one value given
// twice is refused, naming the flag.
func TestRepeatedFlags(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	src := smallModelDir(t, filepath.Join(t.TempDir(), "m"), 5)
	res := c.add(src, "--tag", "v1", "--tag", "latest")
	var ls []struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	}
	c.json(&ls, "ls")
	if len(ls) != 1 || strings.Join(ls[0].Tags, ",") != "latest,v1" {
		t.Errorf("after add --tag v1 --tag latest: ls %+v (add said %+v)", ls, res)
	}
	before := c.snapshot()
	for _, args := range [][]string{
		{"add", src, "--name", "a", "--name", "b"},
		{"checkout", "m", filepath.Join(t.TempDir(), "o"), "--format", "gguf", "--format", "onnx"},
		{"--store", c.store, "ls"},
	} {
		msg := c.fail("schema_error", args...)
		if !strings.Contains(msg, "is given more than once") {
			t.Errorf("%v: %q", args, msg)
		}
	}
	c.requireUnchanged(before)
}

// TestQuietEveryCommand: with -q a command prints only what a script
// needs (add: the digest; show: the digest; ls: the names' rows) or
// nothing, and no notes on stderr.
func TestQuietEveryCommand(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	src := smallModelDir(t, filepath.Join(t.TempDir(), "m"), 6)
	d := c.add(src, "--name", "m").Digest
	c.add(smallModelDir(t, filepath.Join(t.TempDir(), "m2"), 7), "--name", "m")
	out := filepath.Join(t.TempDir(), "out")
	for _, tc := range []struct {
		args []string
		want string // "" for nothing, "*" for anything non-empty
	}{
		{[]string{"init", c.store}, ""},
		{[]string{"add", src, "--name", "q"}, d + "\n"},
		{[]string{"show", "q"}, d + "\n"},
		{[]string{"ls"}, "*"},
		{[]string{"tag", "m:v1", "m"}, ""},
		{[]string{"checkout", "q", out}, ""},
		{[]string{"diff", "m~1", "m"}, ""},
		{[]string{"du"}, ""},
		{[]string{"fsck"}, ""},
		{[]string{"trim", "m", "--keep", "1"}, ""},
		{[]string{"rm", "q"}, ""},
		{[]string{"gc", "--dry-run"}, ""},
		{[]string{"gc"}, ""},
		{[]string{"repack"}, ""},
		{[]string{"remote", "add", "r", filepath.Join(t.TempDir(), "r.mstore")}, ""},
		{[]string{"push", "r", "m"}, ""},
		{[]string{"version"}, "*"},
	} {
		r := c.run(append([]string{"-q"}, tc.args...)...)
		if r.code != 0 && !(tc.args[0] == "diff" && r.code == 1) {
			t.Errorf("-q %v: %s", tc.args, r)
			continue
		}
		if tc.want == "*" && r.stdout == "" || tc.want != "*" && r.stdout != tc.want || r.stderr != "" {
			t.Errorf("-q %v: stdout %q (want %q), stderr %q", tc.args, r.stdout, tc.want, r.stderr)
		}
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(c.ok("-q", "--json", "du")), &doc); err != nil {
		t.Errorf("-q --json: not the JSON document: %v", err)
	}
}

// TestDropNonTensorsSaysWhat: a conversion that --drop-non-tensors lets
// lose what the source holds beside its tensors says what it left out, in
// the note (stderr) and in --json's "left_out".
func TestDropNonTensorsSaysWhat(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	src := writeFile(t, filepath.Join(t.TempDir(), "m.safetensors"), safetensorsFile(smallModel(9), map[string]string{"format": "pt", "trained_by": "acme"}))
	c.add(src, "--name", "m")
	refusal := c.fail("lossy_conversion", "checkout", "m", filepath.Join(t.TempDir(), "pt"), "--format", "pytorch")
	r := c.run("checkout", "m", filepath.Join(t.TempDir(), "pt"), "--format", "pytorch", "--drop-non-tensors")
	if r.code != 0 || !strings.Contains(r.stderr, "left out (--drop-non-tensors): ") || !strings.Contains(r.stderr, "trained_by") {
		t.Errorf("checkout --drop-non-tensors does not say what it left out (the refusal said %q):\n%s", refusal, r)
	}
	var res struct {
		LeftOut []string `json:"left_out"`
	}
	c.json(&res, "checkout", "m", filepath.Join(t.TempDir(), "npz"), "--format", "npz", "--drop-non-tensors")
	if !strings.Contains(strings.Join(res.LeftOut, "; "), "trained_by") {
		t.Errorf("--json left_out %q", res.LeftOut)
	}
	// A real checkpoint's own values (burn's test data: an epoch and a
	// loss beside the state dict).
	ckpt := filepath.Join(sharedTestdata(t, "pytorch"), "burn", "src__pytorch__tests__reader__test_data__checkpoint.pt")
	c.add(ckpt, "--name", "ckpt")
	r = c.run("checkout", "ckpt", filepath.Join(t.TempDir(), "st"), "--format", "safetensors", "--drop-non-tensors")
	if r.code != 0 || !strings.Contains(r.stderr, "left out (--drop-non-tensors): ") || !strings.Contains(r.stderr, "epoch, loss") {
		t.Errorf("a checkpoint's values left out unsaid:\n%s", r)
	}
}

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testenv"
	"github.com/mstore/mstore/internal/testmodel"
)

// TestAddOfFileRewrittenWhileAdded stops an add right after it has parsed
// its model (failpoint add-parsed), rewrites the file at the same size
// with other content (a SafeTensors dtype, a GGUF key/value, a checkpoint
// whose data.pkl now calls posix.system, CRC fixed) and sets its mtime
// back, then lets the add go on: it must fail with integrity_error saying
// the file changed, commit nothing, and run nothing. The same add left
// alone succeeds.
func TestAddOfFileRewrittenWhileAdded(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	marker := filepath.Join(work, "ran")
	rws, err := testmodel.Rewrites("touch " + marker)
	if err != nil {
		t.Fatal(err)
	}
	for _, rw := range rws {
		t.Run(rw.Format, func(t *testing.T) {
			c := newCLI(t)
			c.add(smallModelDir(t, filepath.Join(t.TempDir(), "other"), 3), "--name", "before")
			before := c.snapshot()
			path := writeFile(t, filepath.Join(t.TempDir(), rw.File), rw.Original)
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}

			add := c.start([]string{"MSTORE_FAILPOINT=" + store.FailAddParsed + ":stop"}, "add", path, "--name", "m")
			add.waitStopped(t)
			if err := os.WriteFile(path, rw.Rewritten, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(path, info.ModTime(), info.ModTime()); err != nil {
				t.Fatal(err)
			}
			if now, _ := os.Stat(path); now.Size() != info.Size() || !now.ModTime().Equal(info.ModTime()) {
				t.Fatal("the rewrite did not keep the size and mtime")
			}
			add.cmd.Process.Signal(syscall.SIGCONT)
			o := add.wait(t)
			if o.code != exitCodes["integrity_error"] || !strings.Contains(add.stderr.String(), "integrity_error") ||
				!strings.Contains(add.stderr.String(), "changed while it was being added") {
				t.Fatalf("add of a file rewritten after its parse: %s\nstdout: %s\nstderr: %s", o, add.stdout.String(), add.stderr.String())
			}
			c.requireUnchanged(before)
			if fileExists(marker) {
				t.Fatal("the rewritten checkpoint's code ran")
			}

			// Left alone at the same failpoint, the add goes through.
			writeFile(t, path, rw.Original)
			add = c.start([]string{"MSTORE_FAILPOINT=" + store.FailAddParsed + ":stop"}, "add", path, "--name", "m")
			add.waitStopped(t)
			add.cmd.Process.Signal(syscall.SIGCONT)
			if o := add.wait(t); o.code != 0 {
				t.Fatalf("add stopped and continued, file untouched: %s\n%s", o, add.stderr.String())
			}
			out := filepath.Join(t.TempDir(), "out")
			c.ok("checkout", "m", out)
			requireSameFile(t, path, filepath.Join(out, rw.File))
		})
	}
}

// TestAddUnderLowFileLimit adds a model directory of thousands of files
// with at most 64 descriptors open (prlimit, soft and hard, so that the Go
// runtime cannot raise it): files are opened when needed and closed after.
func TestAddUnderLowFileLimit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("prlimit"); err != nil {
		testenv.Missing(t, "prlimit (util-linux) is not installed")
	}
	dir := smallModelDir(t, filepath.Join(t.TempDir(), "model"), 7)
	const n = 2000
	for i := range n {
		writeFile(t, filepath.Join(dir, "extra", fmt.Sprintf("d%02d", i%50), fmt.Sprintf("f%04d.json", i)), []byte(fmt.Sprintf(`{"i":%d}`, i)))
	}
	c := newCLI(t)
	c.ok("init", c.store)
	start := time.Now()
	cmd := exec.Command("prlimit", "--nofile=64:64", bin, "--store", c.store, "--json", "add", dir, "--name", "many")
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("add of %d files under 64 descriptors: %v\n%s", n, err, out)
	}
	t.Logf("add of %d files under 64 descriptors: %v", n, time.Since(start).Round(time.Millisecond))
	dest := filepath.Join(t.TempDir(), "out")
	c.ok("checkout", "many", dest)
	requireSameTree(t, dir, dest)
}

// TestHFCacheLinksOnlyIntoOwnBlobs: a cache snapshot whose blobs/ is a
// link, or which links into another repo's blobs/, is refused with
// path_traversal and leaves the store as it was.
func TestHFCacheLinksOnlyIntoOwnBlobs(t *testing.T) {
	t.Parallel()
	plain := smallModelDir(t, filepath.Join(t.TempDir(), "plain"), 91)
	cache := func(t *testing.T) (hub, repo, snap string) {
		hub = filepath.Join(t.TempDir(), "hub")
		repo = filepath.Join(hub, "models--acme--llm")
		snap = filepath.Join(repo, "snapshots", "0123456789abcdef")
		for i, f := range listFiles(t, plain) {
			b, err := os.ReadFile(filepath.Join(plain, f))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(repo, "blobs", fmt.Sprintf("blob%02d", i)), b)
			if err := os.MkdirAll(filepath.Dir(filepath.Join(snap, f)), 0o755); err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(filepath.Dir(filepath.Join(snap, f)), filepath.Join(repo, "blobs", fmt.Sprintf("blob%02d", i)))
			if err := os.Symlink(rel, filepath.Join(snap, f)); err != nil {
				t.Fatal(err)
			}
		}
		return hub, repo, snap
	}
	c := newCLI(t)
	_, _, snap := cache(t)
	c.add(snap, "--name", "acme/llm")
	before := c.snapshot()

	t.Run("blobs is a link", func(t *testing.T) {
		_, repo, snap := cache(t)
		moved := filepath.Join(t.TempDir(), "blobs-elsewhere")
		if err := os.Rename(filepath.Join(repo, "blobs"), moved); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(moved, filepath.Join(repo, "blobs")); err != nil {
			t.Fatal(err)
		}
		if msg := c.fail("path_traversal", "add", snap, "--name", "x"); !strings.Contains(msg, "symbolic link") {
			t.Errorf("refusal does not say blobs/ is a link: %s", msg)
		}
	})
	t.Run("link into another repo's blobs", func(t *testing.T) {
		hub, _, snap := cache(t)
		writeFile(t, filepath.Join(hub, "models--acme--other", "blobs", "b"), []byte(`{"other":1}`))
		if err := os.Symlink("../../../models--acme--other/blobs/b", filepath.Join(snap, "extra.json")); err != nil {
			t.Fatal(err)
		}
		c.fail("path_traversal", "add", snap, "--name", "x")
	})
	c.requireUnchanged(before)
}

// TestNonUTF8FileName: a model file whose name is not UTF-8 is refused
// with schema_error naming it, its bytes escaped.
func TestNonUTF8FileName(t *testing.T) {
	t.Parallel()
	dir := smallModelDir(t, filepath.Join(t.TempDir(), "model"), 92)
	writeFile(t, filepath.Join(dir, "notes-\xff\xfe.txt"), []byte("x"))
	c := newCLI(t)
	msg := c.fail("schema_error", "add", dir, "--name", "m")
	if !strings.Contains(msg, `notes-\xff\xfe.txt`) {
		t.Errorf("refusal does not name the file with its bytes escaped: %s", msg)
	}
	if r := c.run("ls"); r.code == 0 && strings.Contains(r.stdout, "m") {
		t.Errorf("a refused add left a ref: %s", r.stdout)
	}
}

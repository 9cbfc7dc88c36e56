package modeldir

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/testenv"
)

// hfCache makes hub/models--acme--llm with blobs/b1 and a snapshot whose
// model.bin links to it, and returns the repo and the snapshot.
func hfCache(t *testing.T) (repo, snap string) {
	t.Helper()
	hub := filepath.Join(t.TempDir(), "hub")
	repo = filepath.Join(hub, "models--acme--llm")
	snap = filepath.Join(repo, "snapshots", "rev1")
	for _, d := range []string{filepath.Join(repo, "blobs"), snap} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, "blobs", "b1"), []byte("weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	symlink(t, "../../blobs/b1", filepath.Join(snap, "model.bin"))
	return repo, snap
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHFCacheLinks: a snapshot's links are followed only into its own
// repo's blobs/, and only while blobs/ is a real folder of the repo (not a
// link, not a mount); every other link is path_traversal.
func TestHFCacheLinks(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, repo, snap string)
		class errs.Class
	}{
		{"links into blobs", func(*testing.T, string, string) {}, 0},
		{"nested snapshot folder", func(t *testing.T, repo, snap string) {
			write(t, filepath.Join(repo, "blobs", "b2"), "{}")
			symlink(t, "../../../blobs/b2", filepath.Join(snap, "sub", "config.json"))
		}, 0},
		{"blobs is a symlink", func(t *testing.T, repo, _ string) {
			elsewhere := filepath.Join(t.TempDir(), "elsewhere")
			write(t, filepath.Join(elsewhere, "b1"), "weights")
			if err := os.RemoveAll(filepath.Join(repo, "blobs")); err != nil {
				t.Fatal(err)
			}
			symlink(t, elsewhere, filepath.Join(repo, "blobs"))
		}, errs.PathTraversal},
		{"link outside blobs", func(t *testing.T, _, snap string) {
			outside := filepath.Join(t.TempDir(), "secret")
			write(t, outside, "secret")
			symlink(t, outside, filepath.Join(snap, "extra.json"))
		}, errs.PathTraversal},
		{"link to another repo's blobs", func(t *testing.T, repo, snap string) {
			other := filepath.Join(filepath.Dir(repo), "models--acme--other")
			write(t, filepath.Join(other, "blobs", "b9"), "other")
			symlink(t, "../../../models--acme--other/blobs/b9", filepath.Join(snap, "extra.bin"))
		}, errs.PathTraversal},
		{"link to a folder inside blobs", func(t *testing.T, repo, snap string) {
			write(t, filepath.Join(repo, "blobs", "deeper", "b3"), "x")
			symlink(t, "../../blobs/deeper/b3", filepath.Join(snap, "extra.bin"))
		}, errs.PathTraversal},
		{"blob that is itself a link out", func(t *testing.T, repo, snap string) {
			outside := filepath.Join(t.TempDir(), "secret")
			write(t, outside, "secret")
			symlink(t, outside, filepath.Join(repo, "blobs", "b4"))
			symlink(t, "../../blobs/b4", filepath.Join(snap, "extra.bin"))
		}, errs.PathTraversal},
		{"link to the repo's refs", func(t *testing.T, repo, snap string) {
			write(t, filepath.Join(repo, "refs", "main"), "rev1")
			symlink(t, "../../refs/main", filepath.Join(snap, "extra.txt"))
		}, errs.PathTraversal},
	} {
		t.Run(c.name, func(t *testing.T) {
			repo, snap := hfCache(t)
			c.setup(t, repo, snap)
			d, err := Open(snap)
			if errs.ClassOf(err) != c.class {
				t.Fatalf("Open: %v, want class %v", err, c.class)
			}
			if err != nil {
				return
			}
			defer d.Close()
			f, err := d.Open("model.bin")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if b, _ := io.ReadAll(io.NewSectionReader(f, 0, f.Size())); string(b) != "weights" {
				t.Fatalf("model.bin reads %q", b)
			}
		})
	}
}

// TestHFCacheBlobsMount: blobs/ on another mount than its repo is not the
// repo's folder; its links are refused (through the mountOf seam, which
// stands in for st_dev and the mount id).
func TestHFCacheBlobsMount(t *testing.T) {
	repo, snap := hfCache(t)
	real := mountOf
	t.Cleanup(func() { mountOf = real })
	blobs := filepath.Join(repo, "blobs")
	mountOf = func(p string) (mount, error) {
		m, err := real(p)
		if p == blobs {
			m.dev++
		}
		return m, err
	}
	if _, err := Open(snap); errs.ClassOf(err) != errs.PathTraversal {
		t.Fatalf("Open with blobs/ on another device: %v, want path_traversal", err)
	}
	mountOf = func(p string) (mount, error) {
		m, err := real(p)
		if p == filepath.Join(blobs, "b1") {
			m.id++
		}
		return m, err
	}
	if _, err := Open(snap); errs.ClassOf(err) != errs.PathTraversal {
		t.Fatalf("Open with a blob mounted into blobs/: %v, want path_traversal", err)
	}
}

// TestHFCacheBlobsBindMount does the same with a real bind mount (root
// only): same device as its source, told apart by the mount id.
func TestHFCacheBlobsBindMount(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "bind mounts need root")
	}
	repo, snap := hfCache(t)
	elsewhere := t.TempDir()
	write(t, filepath.Join(elsewhere, "b1"), "weights")
	blobs := filepath.Join(repo, "blobs")
	if out, err := exec.Command("mount", "--bind", elsewhere, blobs).CombinedOutput(); err != nil {
		testenv.Missing(t, "mount --bind: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", blobs).Run() })
	if _, err := Open(snap); errs.ClassOf(err) != errs.PathTraversal {
		t.Fatalf("Open with a bind mount as blobs/: %v, want path_traversal", err)
	}
}

// TestNonUTF8Names: a file name that is not UTF-8 is refused with
// schema_error, its bytes escaped in the message.
func TestNonUTF8Names(t *testing.T) {
	for _, name := range []string{"model\xff.bin", "sub\xc3/a.json"} {
		root := t.TempDir()
		write(t, filepath.Join(root, name), "x")
		_, err := Open(root)
		if errs.ClassOf(err) != errs.SchemaError {
			t.Fatalf("Open with %q: %v, want schema_error", name, err)
		}
		if want := `\x`; !strings.Contains(err.Error(), want) {
			t.Errorf("error does not escape the name's bytes: %v", err)
		}
		if _, err := Open(filepath.Join(root, name)); name == "model\xff.bin" && errs.ClassOf(err) != errs.SchemaError {
			t.Errorf("Open of the single file %q: %v, want schema_error", name, err)
		}
	}
}

package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testenv"
)

// TestFullDisk puts a store on a small tmpfs and fills the disk so that an
// add runs out of space at many different points (blob writes, pack
// writes, renames, the index commit): each time the add either succeeds or
// fails with size_limit_exceeded, fsck is clean, the version added before
// is whole, and once space is freed the same add succeeds.
func TestFullDisk(t *testing.T) {
	t.Parallel()
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mnt).CombinedOutput(); err != nil {
		testenv.Missing(t, "cannot mount a tmpfs to fill (needs root and mount rights): %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	dirs, trees := crashModels(t, t.TempDir(), 3)
	filler := filepath.Join(mnt, "filler")

	// The disk fills between the blobs and the index commit: the add is
	// stopped once its blobs are durable, the disk filled, the add resumed.
	fresh := &cli{t: t, store: filepath.Join(mnt, "fresh")}
	fresh.ok("init")
	add := fresh.start([]string{"MSTORE_FAILPOINT=" + store.FailBlobsDurable + ":stop"}, "add", dirs[0], "--name", "m")
	add.waitStopped(t)
	fill(t, mnt, filler, 0)
	add.cmd.Process.Signal(syscall.SIGCONT)
	switch o := add.wait(t); {
	case o.code == exitCodes["size_limit_exceeded"]:
		t.Logf("index commit on a full disk: %s", strings.ReplaceAll(strings.TrimSpace(add.stderr.String()), "\n", " / "))
	case o.code == 0:
		t.Logf("the index commit found room on a full disk (bbolt wrote into pages it had)")
	default:
		t.Fatalf("add whose index commit meets a full disk: %s\n%s", o, add.stderr.String())
	}
	fresh.fsck()
	os.Remove(filler)
	fresh.add(dirs[0], "--name", "m")
	fresh.requireCheckout("m", trees[0])
	fresh.ok("rm", "m")
	fresh.ok("gc", "--grace", "0")
	os.RemoveAll(fresh.store)

	c := &cli{t: t, store: filepath.Join(mnt, "store")}
	c.add(dirs[0], "--name", "first")

	var outcomes []string
	// Leave from 0 to ~1.7 MB free: the second model shares no big tensor
	// with the first and needs ~1.3 MB of blobs plus the index's growth.
	// Finely around the edge, where the blobs fit and the index may not.
	var levels []int64
	for free := int64(0); free <= 1700<<10; {
		levels = append(levels, free)
		step := int64(256 << 10)
		if free >= 1200<<10 && free < 1500<<10 {
			step = 8 << 10
		}
		free += step
	}
	for _, free := range levels {
		fill(t, mnt, filler, free)
		r := c.run("--json", "add", dirs[2], "--name", "second")
		switch r.code {
		case 0:
			outcomes = append(outcomes, "ok")
		case exitCodes["size_limit_exceeded"]:
			outcomes = append(outcomes, "full")
			if !strings.Contains(r.stderr, "size_limit_exceeded") {
				t.Errorf("free %d: full disk not reported as size_limit_exceeded:\n%s", free, r)
			}
		default:
			t.Fatalf("free %d: add on a full disk:\n%s", free, r)
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		c.fsck()
		c.requireCheckout("first", trees[0])
		if r.code != 0 {
			c.add(dirs[2], "--name", "second")
		}
		c.requireCheckout("second", trees[2])
		c.ok("rm", "second")
		c.ok("gc", "--grace", "0")
		c.requireTidy()
	}
	t.Logf("adds with 0 to 1.7 MB free: %s", strings.Join(outcomes, " "))
	if !strings.Contains(strings.Join(outcomes, " "), "full") {
		t.Fatal("no add ran out of space: the test does not test anything")
	}
	// gc and fsck on a full disk: they need no space to run.
	fill(t, mnt, filler, 0)
	c.ok("rm", "first")
	c.ok("gc", "--grace", "0")
	c.fsck()
	os.Remove(filler)
	c.add(dirs[1], "--name", "third")
	c.requireCheckout("third", trees[1])
}

// fill writes a file at path so that about free bytes stay free on the
// file system at dir.
func fill(t *testing.T, dir, path string, free int64) {
	t.Helper()
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	avail := int64(fs.Bavail) * fs.Bsize
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for left := avail - free; left > 0; left -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(int64(len(buf)), left)]); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}

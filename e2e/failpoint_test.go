package e2e

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/mstore/mstore/internal/gc"
	"github.com/mstore/mstore/internal/store"
)

// TestAddFailpoints kills an add at each named instant (MSTORE_FAILPOINT):
// after that, fsck is clean, the earlier versions are whole, the new one is
// there only if the index commit happened, and the same add run again
// succeeds. gc then leaves nothing behind.
func TestAddFailpoints(t *testing.T) {
	t.Parallel()
	dirs, trees := crashModels(t, t.TempDir(), 2)
	points := []struct {
		name      string
		committed bool // the version is in the store after the crash
		env       []string
	}{
		{store.FailBlobTempWritten, false, nil},
		{store.FailBeforeSync, false, nil},
		{store.FailAfterRename, false, nil},
		{store.FailBlobsDurable, false, nil},
		{store.FailBeforeIndexCommit, false, nil},
		// Ranges of 4 KB of index: the blobs are recorded ahead of the
		// version in several batches, and the add is killed after the first.
		{store.FailAddBlobsRecorded, false, []string{"MSTORE_INDEX_RANGE_BYTES=4096"}},
		// Manifest, blob records and ref move are one transaction: there is
		// no instant between the commit and the ref write.
		{store.FailAfterIndexCommit, true, nil},
	}
	for _, p := range points {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			c := newRaceCLI(t)
			first := c.add(dirs[0], "--name", "m", "--tag", "v0")
			before := c.readNames()

			run := c.start(append([]string{"MSTORE_FAILPOINT=" + p.name}, p.env...), "add", dirs[1], "--name", "m", "--tag", "v1")
			if o := run.wait(t); o.signal != syscall.SIGKILL {
				t.Fatalf("add with failpoint %s: %s, want killed by SIGKILL\nstderr: %s", p.name, o, run.stderr.String())
			}
			c.fsck()
			after := c.readNames()
			switch {
			case !p.committed && !after.equal(before):
				t.Fatalf("a killed add changed the names: %s → %s", before, after)
			case p.committed && (len(after.history["m"]) != 2 || after.tags["m:v1"].IsZero()):
				t.Fatalf("the add was killed after its commit, yet its ref and tag are not there: %s", after)
			}
			c.requireCheckout("m:v0", trees[0])

			second := c.add(dirs[1], "--name", "m", "--tag", "v1")
			if second.Moved == p.committed {
				t.Errorf("retried add: moved = %v, want %v", second.Moved, !p.committed)
			}
			c.requireCheckout("m", trees[1])
			c.requireCheckout("m:v0", trees[0])
			c.requireCheckout(first.Digest, trees[0])
			c.ok("gc", "--grace", "0")
			c.requireTidy()
		})
	}
}

// TestGCFailpoints kills gc at each named instant: after that, fsck is
// clean, every named version is whole, and gc run again succeeds and
// leaves nothing behind.
func TestGCFailpoints(t *testing.T) {
	t.Parallel()
	dirs, trees := crashModels(t, t.TempDir(), 4)
	for _, point := range []string{gc.FailAfterMark, gc.FailAfterRepack, store.FailBeforeIndexCommit,
		store.FailAfterIndexCommit, gc.FailBetweenRemovals, gc.FailAfterCommit, gc.FailAfterDelete} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			c := newRaceCLI(t)
			for _, d := range dirs[:3] {
				c.add(d, "--name", "m")
			}
			c.add(dirs[3], "--name", "x", "--tag", "keep")
			c.ok("rm", "x")
			c.ok("trim", "m", "--keep", "1") // m's first two versions go; their packs are shared with the third

			// Ranges of 4 KB of index: the dead records are removed in
			// several batches (FailBetweenRemovals is reached).
			run := c.start([]string{"MSTORE_FAILPOINT=" + point, "MSTORE_INDEX_RANGE_BYTES=4096"}, "gc", "--grace", "0")
			if o := run.wait(t); o.signal != syscall.SIGKILL {
				t.Fatalf("gc with failpoint %s: %s, want killed by SIGKILL\nstderr: %s", point, o, run.stderr.String())
			}
			c.fsck()
			c.requireCheckout("m", trees[2])
			c.requireCheckout("x:keep", trees[3])
			c.ok("gc", "--grace", "0")
			c.requireTidy()
			c.requireCheckout("m", trees[2])
			c.requireCheckout("x:keep", trees[3])
		})
	}
}

// TestTagAndRmFailpoints: tag, rm and trim are one index transaction each;
// killed before the commit they change nothing, after it they are done.
func TestTagAndRmFailpoints(t *testing.T) {
	t.Parallel()
	dirs, _ := crashModels(t, t.TempDir(), 2)
	cmds := [][]string{{"tag", "m:t", "m~1"}, {"rm", "m:v0"}, {"rm", "m"}, {"trim", "m", "--keep", "1"}}
	for _, args := range cmds {
		for _, point := range []string{store.FailBeforeIndexCommit, store.FailAfterIndexCommit} {
			t.Run(args[0]+" "+args[1]+"/"+point, func(t *testing.T) {
				t.Parallel()
				c := newRaceCLI(t)
				c.add(dirs[0], "--name", "m", "--tag", "v0")
				c.add(dirs[1], "--name", "m")
				before := c.readNames()
				run := c.start([]string{"MSTORE_FAILPOINT=" + point}, args...)
				if o := run.wait(t); o.signal != syscall.SIGKILL {
					t.Fatalf("%v: %s, want killed\nstderr: %s", args, o, run.stderr.String())
				}
				c.fsck()
				after := c.readNames()
				if committed := !after.equal(before); committed != (point == store.FailAfterIndexCommit) {
					t.Fatalf("killed at %s: names %s → %s", point, before, after)
				}
				if point == store.FailBeforeIndexCommit {
					c.ok(args...)
				}
			})
		}
	}
}

// requireCheckout checks version name out into a fresh directory and
// compares it with want.
func (c *cli) requireCheckout(name string, want map[string][]byte) {
	c.t.Helper()
	dest := filepath.Join(c.t.TempDir(), "out")
	c.ok("checkout", name, dest)
	if got := readTree(c.t, dest); !sameTree(got, want) {
		c.t.Fatalf("checkout %s differs from what was added", name)
	}
}

// requireTidy fails unless fsck is clean and finds nothing unreferenced and
// no leftovers.
func (c *cli) requireTidy() {
	c.t.Helper()
	r := c.fsck()
	if len(r.Leftovers) != 0 || len(r.Unreferenced) != 0 {
		c.t.Fatalf("after gc: leftovers %+v, unreferenced %+v", r.Leftovers, r.Unreferenced)
	}
}

package e2e

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/mstore/mstore/internal/store"
)

// checkoutResult is `checkout --json`.
type checkoutResult struct {
	Digest           string   `json:"digest"`
	Dest             string   `json:"dest"`
	Files            int      `json:"files"`
	RemovedLeftovers []string `json:"removed_leftovers"`
}

// twoModelDirs writes two small models whose file sets differ (the first
// has a generation_config.json the second lacks).
func twoModelDirs(t *testing.T) (string, string) {
	t.Helper()
	a := smallModelDir(t, filepath.Join(t.TempDir(), "a"), 3)
	writeFile(t, filepath.Join(a, "generation_config.json"), []byte(`{"max_new_tokens": 8}`))
	b := smallModelDir(t, filepath.Join(t.TempDir(), "b"), 4)
	return a, b
}

// TestCheckoutForce: --force replaces an earlier checkout of the store
// (its files that the new version lacks are gone) and refuses, changing
// nothing, a DEST that holds a file mstore did not write or a file edited
// since it was checked out, naming that file.
func TestCheckoutForce(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	srcA, srcB := twoModelDirs(t)
	c.add(srcA, "--name", "a")
	c.add(srcB, "--name", "b")
	parent := t.TempDir()
	dest := filepath.Join(parent, "dest")

	c.ok("checkout", "a", dest)
	c.ok("checkout", "b", dest, "--force")
	requireSameTree(t, srcB, dest) // generation_config.json is gone
	if got := dirEntries(t, parent); !equalStrings(got, []string{"dest"}) {
		t.Fatalf("beside DEST: %v", got)
	}

	refused := func(name string) {
		t.Helper()
		before := readTree(t, dest)
		msg := c.fail("conflict", "checkout", "a", dest, "--force")
		if !strings.Contains(msg, name) {
			t.Errorf("the refusal does not name %s: %s", name, msg)
		}
		if !sameTree(readTree(t, dest), before) {
			t.Fatalf("a refused --force changed DEST")
		}
		if got := dirEntries(t, parent); !equalStrings(got, []string{"dest"}) {
			t.Fatalf("a refused --force left %v beside DEST", got)
		}
	}
	mine := writeFile(t, filepath.Join(dest, "mine.txt"), []byte("my notes"))
	refused("mine.txt")
	os.Remove(mine)
	c.ok("checkout", "a", dest, "--force") // nothing foreign left: replaced
	requireSameTree(t, srcA, dest)

	f, err := os.OpenFile(filepath.Join(dest, "config.json"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("\n")
	f.Close()
	refused("config.json")
}

// TestCheckoutLeftovers: checkouts killed with -9, one while writing and
// one just after swapping its tree in for DEST's, leave temp directories
// beside DEST; the next checkout into that parent removes them, but keeps
// the one of a checkout that is still running (its lock file is held).
// The store's own temp area holds nothing of theirs.
func TestCheckoutLeftovers(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	srcA, srcB := twoModelDirs(t)
	c.add(srcA, "--name", "a")
	c.add(srcB, "--name", "b")
	parent := t.TempDir()
	stopWriting := []string{"MSTORE_FAILPOINT=" + store.FailCheckoutFileWritten + ":stop"}

	live := c.start(stopWriting, "checkout", "a", filepath.Join(parent, "live"))
	live.waitStopped(t)
	defer live.kill(t)
	dead := c.start(stopWriting, "checkout", "a", filepath.Join(parent, "dead"))
	dead.waitStopped(t)
	if o := dead.kill(t); o.signal != syscall.SIGKILL {
		t.Fatalf("checkout: %s, want killed", o)
	}
	leftovers := func() []string {
		var out []string
		for _, n := range dirEntries(t, parent) {
			if strings.HasPrefix(n, ".mstore-checkout-") {
				out = append(out, n)
			}
		}
		return out
	}
	byOwner := func(names []string, dest string) []string {
		var out []string
		for _, n := range names {
			if strings.HasPrefix(filepath.Base(n), ".mstore-checkout-"+dest+"-") {
				out = append(out, filepath.Base(n))
			}
		}
		sort.Strings(out)
		return out
	}
	requireRemoved := func(res checkoutResult, want []string) {
		t.Helper()
		var got []string
		for _, p := range res.RemovedLeftovers {
			got = append(got, filepath.Base(p))
		}
		sort.Strings(got)
		if !reflect.DeepEqual(got, want) || len(want) != 2 {
			t.Fatalf("the checkout reports removing %v, want %v (a directory and its lock file)", got, want)
		}
	}
	all := leftovers()
	liveOnes, deadOnes := byOwner(all, "live"), byOwner(all, "dead")
	if len(all) != 4 || len(liveOnes) != 2 || len(deadOnes) != 2 {
		t.Fatalf("leftovers: %v, want a directory and a lock file of each checkout", all)
	}
	if got := listFiles(t, filepath.Join(parent, deadOnes[0])); len(got) == 0 {
		t.Fatal("the checkout was killed before it wrote anything: the test proves nothing")
	}
	if r := c.fsck(); len(r.Leftovers) != 0 {
		t.Fatalf("the killed checkout left files in the store: %+v", r.Leftovers)
	}

	// The next checkout into the parent removes the dead one's, not the
	// running one's.
	swapped := filepath.Join(parent, "swapped")
	var res checkoutResult
	c.json(&res, "checkout", "a", swapped)
	requireRemoved(res, deadOnes)
	if got := leftovers(); !reflect.DeepEqual(got, liveOnes) {
		t.Fatalf("leftovers after the next checkout: %v, want only the running one's %v", got, liveOnes)
	}

	// Killed just after the exchange: DEST holds the new tree, the temp
	// directory the old one, which the next checkout removes.
	p := c.start([]string{"MSTORE_FAILPOINT=" + store.FailCheckoutExchanged}, "checkout", "b", swapped, "--force")
	if o := p.wait(t); o.signal != syscall.SIGKILL {
		t.Fatalf("checkout --force: %s, want killed at its failpoint\nstderr: %s", o, p.stderr.String())
	}
	requireSameTree(t, srcB, swapped)
	swappedOnes := byOwner(leftovers(), "swapped")
	if r := c.fsck(); len(r.Leftovers) != 0 {
		t.Fatalf("the killed checkout left files in the store: %+v", r.Leftovers)
	}
	res = checkoutResult{}
	c.json(&res, "checkout", "b", filepath.Join(parent, "next"))
	requireRemoved(res, swappedOnes)
	if got := leftovers(); !reflect.DeepEqual(got, liveOnes) {
		t.Fatalf("leftovers after the next checkout: %v, want only the running one's %v", got, liveOnes)
	}
	requireSameTree(t, srcB, swapped)
	c.ok("checkout", "a", swapped, "--force") // the swapped-in tree was recorded
	requireSameTree(t, srcA, swapped)

	// The running checkout goes on and finishes, leaving nothing beside.
	if err := live.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if o := live.wait(t); o.signal != 0 || o.code != 0 {
		t.Fatalf("the stopped checkout: %s\nstderr: %s", o, live.stderr.String())
	}
	requireSameTree(t, srcA, filepath.Join(parent, "live"))
	if got := leftovers(); len(got) != 0 {
		t.Fatalf("left after every checkout ended: %v", got)
	}
	c.ok("gc", "--grace", "0")
	c.requireTidy()
}

// TestCheckoutKilledWritingItsRecord: a checkout killed while its record
// is a temp file in the store leaves that file, which fsck reports as a
// leftover and gc removes; its directory beside DEST goes with the next
// checkout there.
func TestCheckoutKilledWritingItsRecord(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	src := smallModelDir(t, filepath.Join(t.TempDir(), "m"), 5)
	c.add(src, "--name", "m")
	parent := t.TempDir()
	p := c.start([]string{"MSTORE_FAILPOINT=" + store.FailCheckoutRecordTemp}, "checkout", "m", filepath.Join(parent, "out"))
	if o := p.wait(t); o.signal != syscall.SIGKILL {
		t.Fatalf("checkout: %s, want killed at its failpoint\nstderr: %s", o, p.stderr.String())
	}
	r := c.fsck()
	if len(r.Leftovers) != 1 || !strings.HasPrefix(r.Leftovers[0].Path, "tmp/checkout-") {
		t.Fatalf("fsck leftovers: %+v, want the checkout's temp record", r.Leftovers)
	}
	if got := dirEntries(t, parent); len(got) != 2 {
		t.Fatalf("beside DEST: %v, want the killed checkout's directory and lock file", got)
	}
	c.ok("checkout", "m", filepath.Join(parent, "out"))
	requireSameTree(t, src, filepath.Join(parent, "out"))
	if got := dirEntries(t, parent); !equalStrings(got, []string{"out"}) {
		t.Fatalf("beside DEST after the next checkout: %v", got)
	}
	c.ok("gc", "--grace", "0")
	c.requireTidy()
}

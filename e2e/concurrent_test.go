package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
)

// TestGCRacingAdd stops an add (SIGSTOP, at the failpoint where its blobs
// are durable under their final names and not yet recorded), runs gc, and
// lets the add go on: gc must wait or give up, never delete the add's blobs,
// and the add's model must come back whole.
func TestGCRacingAdd(t *testing.T) {
	t.Parallel()
	dirs, trees := crashModels(t, t.TempDir(), 3)
	c := newRaceCLI(t)
	c.add(dirs[0], "--name", "m")
	c.ok("rm", "m") // garbage for gc to collect meanwhile

	add := c.start([]string{"MSTORE_FAILPOINT=" + store.FailBlobsDurable + ":stop"}, "add", dirs[1], "--name", "n")
	add.waitStopped(t)

	// gc gives up while the add holds the lock, and deletes nothing.
	before := listFiles(t, c.store+"/objects")
	r := c.run("gc", "--grace", "0", "--wait", "200ms")
	if r.code != exitCodes["conflict"] || !strings.Contains(r.stderr, "add") {
		t.Fatalf("gc while an add is stopped before its commit:\n%s", r)
	}
	if after := listFiles(t, c.store+"/objects"); !equalStrings(before, after) {
		t.Fatalf("gc changed objects/ while an add held the lock: %v", diffStrings(before, after))
	}
	// fsck (shared lock) runs beside the add and sees its files as leftovers.
	if rep := c.fsck(); len(rep.Leftovers) == 0 {
		t.Error("fsck does not see the stopped add's unrecorded files")
	}

	// A gc that waits long enough runs after the add.
	gc := c.start(nil, "gc", "--grace", "0", "--wait", "60s")
	time.Sleep(100 * time.Millisecond)
	select {
	case <-gc.done:
		t.Fatalf("gc did not wait for the add: %s\n%s", gc.wait(t), gc.stderr.String())
	default:
	}
	add.cmd.Process.Signal(syscall.SIGCONT)
	if o := add.wait(t); o.code != 0 || o.signal != 0 {
		t.Fatalf("add after SIGCONT: %s\n%s", o, add.stderr.String())
	}
	if o := gc.wait(t); o.code != 0 || o.signal != 0 {
		t.Fatalf("gc after the add: %s\n%s", o, gc.stderr.String())
	}
	c.requireCheckout("n", trees[1])
	c.requireTidy()
}

// TestLockOfKilledAddIsRecovered: an add killed while it holds the store's
// lock leaves no lock behind (flock dies with its process): gc runs at once
// and removes the add's unrecorded files.
func TestLockOfKilledAddIsRecovered(t *testing.T) {
	t.Parallel()
	dirs, trees := crashModels(t, t.TempDir(), 2)
	c := newRaceCLI(t)
	c.add(dirs[0], "--name", "m")
	add := c.start([]string{"MSTORE_FAILPOINT=" + store.FailBlobsDurable + ":stop"}, "add", dirs[1], "--name", "m")
	add.waitStopped(t)
	if o := add.kill(t); o.signal != syscall.SIGKILL {
		t.Fatalf("stopped add: %s", o)
	}
	if rep := c.fsck(); len(rep.Leftovers) == 0 {
		t.Fatal("the killed add left no files: the failpoint came too early")
	}
	c.ok("gc", "--grace", "0", "--wait", "1s")
	c.requireTidy()
	c.requireCheckout("m", trees[0])
	c.add(dirs[1], "--name", "m")
	c.requireCheckout("m", trees[1])
}

// TestParallelAddsWithGCLoop runs several processes adding overlapping
// models (with tags) to a shared ref and to their own refs, a process
// tagging the shared ref, and gc in a loop. Nothing is lost, every ref ends
// at one of the versions written to it, dedup is intact (each blob stored
// once, no unused bytes after a last gc).
func TestParallelAddsWithGCLoop(t *testing.T) {
	t.Parallel()
	const writers, rounds = 3, 4
	dirs, trees := crashModels(t, t.TempDir(), 5)
	c := newRaceCLI(t)
	c.ok("init")

	var (
		mu      sync.Mutex
		written = map[string][]objects.Digest{} // ref → versions added to it
		tagged  = map[string]objects.Digest{}   // NAME:TAG → version
		treeOf  = map[objects.Digest]int{}
		failed  []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failed = append(failed, fmt.Sprintf(format, args...))
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				i := (w + r) % len(dirs)
				for _, args := range [][]string{
					{"add", dirs[i], "--name", "shared"},
					{"add", dirs[i], "--name", fmt.Sprintf("own%d", w), "--tag", fmt.Sprintf("r%d", r)},
				} {
					res := c.run(append([]string{"--json"}, args...)...)
					if res.code != 0 {
						fail("%s", res)
						continue
					}
					var out addResult
					decodeStrict(t, res, &out)
					d := mustDigest(t, out.Digest)
					mu.Lock()
					written[args[3]] = append(written[args[3]], d)
					treeOf[d] = i
					if len(args) > 4 {
						tagged[args[3]+":"+args[5]] = d
					}
					mu.Unlock()
				}
			}
		}()
	}
	stop := make(chan struct{})
	var loops sync.WaitGroup
	gcRuns := map[int]int{}
	loops.Add(2)
	go func() { // gc in a loop: done, or refused while adds run
		defer loops.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			r := c.run("gc", "--grace", "0", "--wait", "50ms")
			mu.Lock()
			gcRuns[r.code]++
			mu.Unlock()
			if r.code != 0 && r.code != exitCodes["conflict"] {
				fail("gc: %s", r)
			}
		}
	}()
	go func() { // tags on the shared ref, wherever it is
		defer loops.Done()
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			default:
			}
			tag := fmt.Sprintf("shared:snap%d", k)
			r := c.run("--json", "tag", tag, "shared")
			if r.code != 0 {
				if r.code != exitCodes["not_found"] { // before the first add
					fail("tag: %s", r)
				}
				time.Sleep(10 * time.Millisecond)
				continue
			}
			var out struct {
				Digest string `json:"digest"`
			}
			decodeStrict(t, r, &out)
			mu.Lock()
			tagged[tag] = mustDigest(t, out.Digest)
			mu.Unlock()
		}
	}()
	wg.Wait()
	close(stop)
	loops.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d commands failed:\n%s", len(failed), strings.Join(failed, "\n"))
	}
	t.Logf("gc runs by exit code: %v; %d tags", gcRuns, len(tagged))

	c.fsck()
	got := c.readNames()
	for ref, ds := range written {
		cur := got.history[ref]
		if len(cur) == 0 || !slices.Contains(ds, cur[len(cur)-1]) {
			t.Errorf("ref %s ends at %v, not one of the versions written to it", ref, cur)
		}
		for _, d := range cur {
			if !slices.Contains(ds, d) {
				t.Errorf("ref %s's history holds %s, never written to it", ref, d.Short())
			}
		}
	}
	for k, d := range tagged {
		if got.tags[k] != d {
			t.Errorf("tag %s names %s, want %s", k, got.tags[k].Short(), d.Short())
		}
		c.requireCheckout(k, trees[treeOf[d]])
	}
	for ref, h := range got.history {
		for back := range h {
			c.requireCheckout(fmt.Sprintf("%s~%d", ref, back), trees[treeOf[h[len(h)-1-back]]])
		}
	}
	c.ok("gc", "--grace", "0")
	c.requireTidy()
	requireDedup(t, c.store)
}

// requireDedup checks that the store records exactly the blobs its versions
// need, each once, and that its pack files hold no bytes but theirs.
func requireDedup(t *testing.T, dir string) {
	t.Helper()
	st, err := store.Open(dir, false, store.Options{LockTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	need := map[objects.Digest]bool{}
	var recorded int
	packed := map[store.PackID]int64{}
	err = st.View(func(tx *bolt.Tx) error {
		reach, err := refs.Referenced(tx)
		if err != nil {
			return err
		}
		for d := range reach {
			m, err := st.Manifest(tx, d)
			if err != nil {
				return err
			}
			need[d] = true // the manifest's own blob copy
			for _, b := range m.Blobs() {
				need[b] = true
			}
		}
		return store.ForEachBlob(tx, func(r store.BlobRecord) error {
			recorded++
			if r.Encoding == store.EncodingPacked {
				packed[r.Pack] += r.Size
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if recorded != len(need) {
		t.Errorf("%d blobs recorded, the versions need %d", recorded, len(need))
	}
	err = st.WalkFiles(func(f store.StoredFile) error {
		if f.Kind == store.FilePack && f.Size != packed[f.Pack] {
			t.Errorf("pack %s holds %d bytes, its recorded blobs %d", f.Rel, f.Size, packed[f.Pack])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/objects"
)

// crashIterations is how many commands TestKillAtRandomInstants kills:
// 100 in the normal suite, 1000 with MSTORE_SOAK=1.
func crashIterations() int {
	if os.Getenv("MSTORE_SOAK") != "" {
		return 1000
	}
	return 100
}

// TestKillAtRandomInstants runs add, tag, rm, trim, gc, checkout and fsck
// --repair on one store, each killed with SIGKILL at a random instant of
// its run (or not, when it finishes first). After each: fsck is clean (no
// blob file under its final name holds other bytes than its name says);
// a command that exited 0 kept its whole result, one that failed changed
// nothing, one that was killed did all or nothing; every ref and tag
// resolves (fsck checks it); a checkout that exited 0 wrote the exact
// files. At the end every name checks out byte for byte and gc leaves a
// store with nothing to free.
func TestKillAtRandomInstants(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("MSTORE_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (MSTORE_CRASH_SEED reruns it)", seed)
	rng := rand.New(rand.NewPCG(seed, 7))

	root := t.TempDir()
	dirs, trees := crashModels(t, root, 4)
	digests := make([]objects.Digest, len(dirs))
	scratch := newRaceCLI(t)
	// How long each kind of command runs when nothing stops it: the kill
	// instant is drawn from 0 to 1.3 times that.
	avg := map[string]time.Duration{}
	timed := func(kind string, args ...string) string {
		began := time.Now()
		out := scratch.ok(args...)
		avg[kind] = max(avg[kind], time.Since(began))
		return out
	}
	for i, d := range dirs {
		timed("add", "add", d, "--name", "a", "--tag", fmt.Sprint("t", i))
		digests[i] = mustDigest(t, scratch.add(d).Digest)
	}
	timed("tag", "tag", "a:x", "a~1")
	timed("rm tag", "rm", "a:x")
	timed("trim", "trim", "a", "--keep", "2")
	timed("rm", "rm", "a")
	timed("checkout", "checkout", "a:t0", filepath.Join(root, "calibrate"))
	timed("fsck --repair", "fsck", "--repair")
	timed("gc", "gc", "--grace", "0")
	t.Logf("command durations: %v", avg)
	treeOf := map[objects.Digest]int{}
	for i, d := range digests {
		treeOf[d] = i
	}

	c := newRaceCLI(t)
	c.ok("init")
	state := c.readNames()
	stats := map[string]map[string]int{}
	n := crashIterations()
	start := time.Now()
	for it := range n {
		cmd := pickCommand(rng, state, dirs, digests, root, it)
		next := cmd.next(state)
		// Half the kills fall anywhere in the run, half in its second half,
		// where the writes and the commit are.
		u := rng.Float64() * 1.3
		if rng.IntN(2) == 0 {
			u = 0.5 + rng.Float64()*0.8
		}
		delay := time.Duration(u * float64(avg[cmd.kind]))

		began := time.Now()
		p := c.start(nil, cmd.args...)
		var o outcome
		select {
		case <-p.done:
			o = p.wait(t)
		case <-time.After(delay):
			o = p.kill(t)
		}
		if o.signal == 0 && o.code == 0 {
			avg[cmd.kind] = (avg[cmd.kind]*3 + time.Since(began)) / 4
		}
		if stats[cmd.kind] == nil {
			stats[cmd.kind] = map[string]int{}
		}
		stats[cmd.kind][o.String()]++
		if o.signal != 0 && o.signal != syscall.SIGKILL {
			t.Fatalf("iteration %d: mstore %v: %s\nstderr: %s", it, cmd.args, o, p.stderr.String())
		}

		c.fsck()
		got := c.readNames()
		switch {
		case o.signal == 0 && o.code == 0 && !got.equal(next):
			t.Fatalf("iteration %d: mstore %v exited 0, but the names are\n%s\nwant\n%s", it, cmd.args, got, next)
		case o.signal == 0 && o.code != 0 && !got.equal(state):
			t.Fatalf("iteration %d: mstore %v failed (%s), yet the names changed:\n%s\n→ %s\nstderr: %s", it, cmd.args, o, state, got, p.stderr.String())
		case o.signal != 0 && !got.equal(state) && !got.equal(next):
			t.Fatalf("iteration %d: mstore %v killed; the names are neither as before nor as after:\n%s\nbefore %s\nafter  %s", it, cmd.args, got, state, next)
		}
		if cmd.dest != "" {
			_, err := os.Stat(cmd.dest)
			switch {
			case o.signal == 0 && o.code == 0 || err == nil:
				if tree := readTree(t, cmd.dest); !sameTree(tree, trees[treeOf[cmd.want]]) {
					t.Fatalf("iteration %d: checkout %v (%s) left a destination that differs from the version", it, cmd.args, o)
				}
			case !os.IsNotExist(err):
				t.Fatal(err)
			}
		}
		state = got
		if it%10 == 9 { // now and then, read a random name back byte for byte
			if spec, d, ok := randomName(rng, state); ok {
				c.requireCheckout(spec, trees[treeOf[d]])
			}
		}
	}
	elapsed := time.Since(start)

	for name, h := range state.history {
		for back := range h {
			spec := fmt.Sprintf("%s~%d", name, back)
			c.requireCheckout(spec, trees[treeOf[h[len(h)-1-back]]])
		}
	}
	for k, d := range state.tags {
		c.requireCheckout(k, trees[treeOf[d]])
	}
	// Killed checkouts left temp directories beside their destinations;
	// the next checkout there removes every one (none is running).
	if spec, _, ok := randomName(rng, state); ok {
		c.ok("checkout", spec, filepath.Join(root, "checkouts", "final"))
		entries, _ := os.ReadDir(filepath.Join(root, "checkouts"))
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".mstore-checkout-") {
				t.Errorf("a killed checkout's %s is still there after the next checkout", e.Name())
			}
		}
	}
	c.ok("gc", "--grace", "0")
	c.requireTidy()

	// The journal must hold every committed change the crashes left: a
	// rebuilt index names exactly what the index named. (One add first: a
	// command killed after its journal write and before its index commit
	// leaves a batch that only the next journaled commit supersedes; a
	// rebuild right after such a kill shows that command done.)
	c.add(dirs[0], "--name", "after-crashes")
	want := c.readNames()
	wantLog := c.ok("--json", "ls")
	c.ok("fsck", "--rebuild-index")
	if got := c.readNames(); !got.equal(want) {
		t.Fatalf("after the crashes, a rebuilt index names\n%s\nwant\n%s", got, want)
	}
	if got := c.ok("--json", "ls"); got != wantLog {
		t.Fatalf("ls after the rebuild:\n%s\nbefore:\n%s", got, wantLog)
	}
	c.fsck()

	var kinds []string
	for k := range stats {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var report []string
	for _, k := range kinds {
		report = append(report, fmt.Sprintf("%s %v", k, stats[k]))
	}
	t.Logf("%d commands killed at random instants in %s: %s", n, elapsed.Round(time.Millisecond), strings.Join(report, "; "))
}

// TestKillWhileCreatingStore kills the first add into a new store at
// random instants: the store is then either absent or clean, and the add
// run again succeeds.
func TestKillWhileCreatingStore(t *testing.T) {
	t.Parallel()
	dirs, trees := crashModels(t, t.TempDir(), 1)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	for i := range 20 {
		c := newRaceCLI(t)
		p := c.start(nil, "add", dirs[0], "--name", "m")
		select {
		case <-p.done:
			p.wait(t)
		case <-time.After(time.Duration(rng.Int64N(int64(20 * time.Millisecond)))):
			p.kill(t)
		}
		if _, err := os.Stat(filepath.Join(c.store, "index.db")); err == nil {
			c.fsck()
		} else if !os.IsNotExist(err) {
			t.Fatal(err)
		}
		c.add(dirs[0], "--name", "m")
		c.requireCheckout("m", trees[0])
		if i%5 == 0 {
			c.ok("gc", "--grace", "0")
			c.requireTidy()
		}
	}
}

// crashCmd is one command of the random loop.
type crashCmd struct {
	kind string
	args []string
	next func(names) names // the names after the command, if it succeeds
	dest string            // checkout destination
	want objects.Digest    // what a checkout writes
}

var (
	crashRefs = []string{"a", "b"}
	crashTags = []string{"t1", "t2", "t3"}
)

func pickCommand(rng *rand.Rand, state names, dirs []string, digests []objects.Digest, root string, it int) crashCmd {
	same := func(n names) names { return n }
	ref := crashRefs[rng.IntN(len(crashRefs))]
	tag := crashTags[rng.IntN(len(crashTags))]
	switch k := rng.IntN(20); {
	case k < 7:
		i := rng.IntN(len(dirs))
		args := []string{"add", dirs[i], "--name", ref}
		withTag := rng.IntN(3) == 0
		if withTag {
			args = append(args, "--tag", tag)
		}
		return crashCmd{kind: "add", args: args, next: func(n names) names {
			n = n.clone()
			if h := n.history[ref]; len(h) == 0 || h[len(h)-1] != digests[i] {
				n.history[ref] = append(h, digests[i])
			}
			if withTag {
				n.tags[ref+":"+tag] = digests[i]
			}
			return n
		}}
	case k < 9:
		h := state.history[ref]
		back := rng.IntN(2)
		spec := ref
		if back == 1 {
			spec = ref + "~1"
		}
		return crashCmd{kind: "tag", args: []string{"tag", ref + ":" + tag, spec}, next: func(n names) names {
			if back >= len(h) {
				return n // the command fails: not_found
			}
			n = n.clone()
			n.tags[ref+":"+tag] = h[len(h)-1-back]
			return n
		}}
	case k < 10:
		return crashCmd{kind: "rm", args: []string{"rm", ref}, next: func(n names) names {
			n = n.clone()
			delete(n.history, ref)
			return n
		}}
	case k < 11:
		return crashCmd{kind: "rm tag", args: []string{"rm", ref + ":" + tag}, next: func(n names) names {
			n = n.clone()
			delete(n.tags, ref+":"+tag)
			return n
		}}
	case k < 12:
		keep := 1 + rng.IntN(2)
		return crashCmd{kind: "trim", args: []string{"trim", ref, "--keep", strconv.Itoa(keep)}, next: func(n names) names {
			n = n.clone()
			if h, ok := n.history[ref]; ok {
				n.history[ref] = h[max(len(h)-keep, 0):]
			}
			return n
		}}
	case k < 16:
		return crashCmd{kind: "gc", args: []string{"gc", "--grace", "0"}, next: same}
	case k < 17:
		return crashCmd{kind: "fsck --repair", args: []string{"fsck", "--repair"}, next: same}
	default:
		spec, d, ok := randomName(rng, state)
		if !ok {
			return crashCmd{kind: "gc", args: []string{"gc", "--grace", "0"}, next: same}
		}
		dest := filepath.Join(root, "checkouts", strconv.Itoa(it))
		return crashCmd{kind: "checkout", args: []string{"checkout", spec, dest}, next: same, dest: dest, want: d}
	}
}

// randomName picks a name the store holds: NAME~N or NAME:TAG.
func randomName(rng *rand.Rand, state names) (string, objects.Digest, bool) {
	type named struct {
		spec string
		d    objects.Digest
	}
	var all []named
	for name, h := range state.history {
		for back := range h {
			all = append(all, named{fmt.Sprintf("%s~%d", name, back), h[len(h)-1-back]})
		}
	}
	for k, d := range state.tags {
		all = append(all, named{k, d})
	}
	if len(all) == 0 {
		return "", objects.Digest{}, false
	}
	slices.SortFunc(all, func(a, b named) int { return strings.Compare(a.spec, b.spec) })
	n := all[rng.IntN(len(all))]
	return n.spec, n.d, true
}

func mustDigest(t *testing.T, s string) objects.Digest {
	t.Helper()
	d, err := objects.ParseDigest(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

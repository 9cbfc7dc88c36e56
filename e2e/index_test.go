package e2e

import (
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
	"path/filepath"
	"strings"
	"testing"
)

// storeViews is what `ls`, `remote ls`, `log` and `show` print about a
// store, as JSON.
func (c *cli) storeViews(refNames ...string) map[string]string {
	c.t.Helper()
	out := map[string]string{"ls": c.ok("--json", "ls"), "remote ls": c.ok("--json", "remote", "ls")}
	for _, n := range refNames {
		out["log "+n] = c.ok("--json", "log", n)
		out["show "+n] = c.ok("--json", "show", n)
	}
	return out
}

// TestRebuildIndexCLI builds a store with adds, tags, moves, a removed tag,
// a trim, a removed ref, a gc and named remotes (one removed, one re-added); then deletes or damages index.db, runs
// `fsck --rebuild-index`, and requires the same ls, log and show output
// (JSON), every version checking out byte for byte, and a clean fsck.
func TestRebuildIndexCLI(t *testing.T) {
	t.Parallel()
	dirs, trees := crashModels(t, t.TempDir(), 4)
	for _, damage := range []string{"deleted", "truncated", "bit-flipped"} {
		t.Run(damage, func(t *testing.T) {
			c := newCLI(t)
			c.add(dirs[0], "--name", "m", "--tag", "v1")
			c.add(dirs[1], "--name", "m", "-m", "second")
			c.ok("tag", "m:v2", "m")
			c.add(dirs[2], "--name", "other")
			c.add(dirs[0], "--name", "m", "-m", "back to the first")
			c.ok("tag", "m:tmp", "m~1")
			c.ok("rm", "m:tmp")
			c.add(dirs[3], "--name", "gone")
			c.ok("rm", "gone")
			c.add(dirs[2], "--name", "m")
			c.ok("trim", "m", "--keep", "3")
			c.ok("gc", "--grace", "0")
			c.ok("remote", "add", "origin", "http://127.0.0.1:1")
			c.ok("remote", "add", "gone", "/srv/gone.mstore")
			c.ok("remote", "add", "moved", "/srv/old.mstore")
			c.ok("remote", "rm", "gone")
			c.ok("remote", "rm", "moved")
			c.ok("remote", "add", "moved", "s3://bucket/new")
			c.fsck()
			before := c.storeViews("m", "other")
			if n := strings.Count(before["remote ls"], `"name"`); n != 2 {
				t.Fatalf("remote ls before the rebuild: %s", before["remote ls"])
			}
			want := map[string]map[string][]byte{"m": trees[2], "m~1": trees[0], "m~2": trees[1], "m:v1": trees[0], "m:v2": trees[1], "other": trees[2]}

			index := filepath.Join(c.store, "index.db")
			switch damage {
			case "deleted":
				os.Remove(index)
			case "truncated":
				os.Truncate(index, 3*4096)
			case "bit-flipped":
				b, _ := os.ReadFile(index)
				for p := 2 * 4096; p+16 < len(b); p += 4096 {
					b[p+8] ^= 0x5a // every data page's flags
				}
				os.WriteFile(index, b, 0o644)
			}
			msg := c.fail("integrity_error", "ls")
			if !strings.Contains(msg, "fsck --rebuild-index") {
				t.Errorf("the error does not say what to do: %s", msg)
			}
			c.fail("integrity_error", "add", dirs[3], "--name", "x") // never a fresh, empty index over the lost one
			var rep struct {
				OK       bool     `json:"ok"`
				OldIndex string   `json:"old_index"`
				Problems []string `json:"problems"`
			}
			c.json(&rep, "fsck", "--rebuild-index")
			if !rep.OK || len(rep.Problems) != 0 {
				t.Fatalf("rebuild: %+v", rep)
			}
			if damage != "deleted" {
				if _, err := os.Stat(filepath.Join(c.store, rep.OldIndex)); rep.OldIndex == "" || err != nil {
					t.Errorf("the damaged index was not kept (%q): %v", rep.OldIndex, err)
				}
			}
			after := c.storeViews("m", "other")
			for k, v := range before {
				if after[k] != v {
					t.Errorf("%s after the rebuild:\n%s\nbefore:\n%s", k, after[k], v)
				}
			}
			c.fsck()
			for name, tree := range want {
				c.requireCheckout(name, tree)
			}
			c.fail("not_found", "show", "gone")
			c.fail("conflict", "tag", "m:tmp", "m") // retired at m~1: it never names another version
			c.add(dirs[3], "--name", "after")       // the store goes on
			c.fsck()
		})
	}
}

// TestDamagedIndexCommands damages index.db (truncated, zeroed, flipped)
// and runs every command: each must exit with integrity_error, never a
// panic or a signal (execMstore fails the test on a signal).
func TestDamagedIndexCommands(t *testing.T) {
	t.Parallel()
	dirs, _ := crashModels(t, t.TempDir(), 2)
	c := newCLI(t)
	c.add(dirs[0], "--name", "m", "--tag", "v1")
	c.add(dirs[1], "--name", "m")
	good, err := os.ReadFile(filepath.Join(c.store, "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	damages := map[string]func([]byte) []byte{
		"truncated to 0":          func(b []byte) []byte { return b[:0] },
		"truncated to 3 pages":    func(b []byte) []byte { return b[:3*4096] },
		"truncated in a page":     func(b []byte) []byte { return b[:3*4096+100] },
		"meta pages zeroed":       func(b []byte) []byte { clear(b[:2*4096]); return b },
		"data pages zeroed":       func(b []byte) []byte { clear(b[2*4096:]); return b },
		"data page flags flipped": func(b []byte) []byte { return flipPages(b, 8, 0xff) },
		"page ids flipped":        func(b []byte) []byte { return flipPages(b, 0, 0x40) },
	}
	out := filepath.Join(t.TempDir(), "out")
	commands := [][]string{{"ls"}, {"show", "m"}, {"log", "m"}, {"du"}, {"gc"}, {"fsck"}, {"checkout", "m", out},
		{"add", dirs[0], "--name", "x"}, {"tag", "m:v2", "m"}, {"diff", "m", "m~1"}, {"trim", "m", "--keep", "1"}, {"rm", "m"}}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(c.store, "index.db"), damage(append([]byte{}, good...)), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range commands {
				r := c.run(args...)
				if r.code != exitCodes["integrity_error"] || !strings.Contains(r.stderr, "integrity_error") {
					t.Errorf("%v: want integrity_error:\n%s", args, r)
				}
				if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
					t.Errorf("%v: crashed:\n%s", args, r)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("checkout wrote %s from a damaged index", out)
			}
		})
	}
}

// flipPages XORs byte off of every page after the two meta pages.
func flipPages(b []byte, off int, mask byte) []byte {
	for p := 2 * 4096; p+off < len(b); p += 4096 {
		b[p+off] ^= mask
	}
	return b
}

// manifestSize is the size of version digest's manifest blob: every add
// stores its manifest as a blob too (the copy `fsck --rebuild-index` reads),
// so it counts in new_bytes and du.
func (c *cli) manifestSize(digest string) int64 {
	c.t.Helper()
	d, err := objects.ParseDigest(digest)
	if err != nil {
		c.t.Fatal(err)
	}
	st, err := store.Open(c.store, false, store.Options{LockTimeout: 10 * time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	var n int64
	err = st.View(func(tx *bolt.Tx) error {
		rec, ok, err := store.Blob(tx, d)
		if !ok && err == nil {
			c.t.Fatalf("version %s has no manifest blob", d.Short())
		}
		n = rec.Size
		return err
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return n
}

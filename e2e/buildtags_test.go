package e2e

import (
	"debug/buildinfo"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/mstore/mstore/internal/gc"
	"github.com/mstore/mstore/internal/store"
)

// TestBinariesBuildFlags: the binaries the tests run are built as the
// tests assume: both with failpoints, raceBin with the race detector
// exactly when the suite runs with -race.
func TestBinariesBuildFlags(t *testing.T) {
	t.Parallel()
	for _, b := range []struct {
		path string
		race bool
	}{{bin, false}, {raceBin, raceEnabled}} {
		s := buildSettings(t, b.path)
		if s["-tags"] != "failpoints" {
			t.Errorf("%s built with -tags %q, want failpoints", b.path, s["-tags"])
		}
		if race := s["-race"] == "true"; race != b.race {
			t.Errorf("%s: race detector %v, want %v", b.path, race, b.race)
		}
	}
}

func buildSettings(t *testing.T, path string) map[string]string {
	t.Helper()
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, s := range info.Settings {
		m[s.Key] = s.Value
	}
	return m
}

// TestFailpointsNeedBuildTag: a binary built without -tags failpoints
// ignores MSTORE_FAILPOINT (a released mstore cannot be made to kill
// itself by its environment); the tests' binary, built with it, dies at
// the point. The add and the gc points are checked.
func TestFailpointsNeedBuildTag(t *testing.T) {
	t.Parallel()
	plain := filepath.Join(t.TempDir(), "mstore")
	flags := []string{}
	if raceEnabled {
		flags = append(flags, "-race") // what `go test -race ./...` has compiled already
	}
	if err := buildMstore(plain, flags...); err != nil {
		t.Fatal(err)
	}
	if tags := buildSettings(t, plain)["-tags"]; tags != "" {
		t.Fatalf("built with -tags %q, want none", tags)
	}
	dirs, trees := crashModels(t, t.TempDir(), 2)

	withTag := newCLI(t)
	withTag.add(dirs[0], "--name", "m")
	run := withTag.start([]string{"MSTORE_FAILPOINT=" + store.FailAfterIndexCommit}, "add", dirs[1], "--name", "m")
	if o := run.wait(t); o.signal != syscall.SIGKILL {
		t.Fatalf("add in a failpoints build with MSTORE_FAILPOINT=%s: %s, want killed\n%s",
			store.FailAfterIndexCommit, o, run.stderr.String())
	}

	c := &cli{t: t, bin: plain, store: filepath.Join(t.TempDir(), "store")}
	for _, fp := range []string{store.FailBlobTempWritten, store.FailAfterIndexCommit, store.FailAfterIndexCommit + ":stop"} {
		run := c.start([]string{"MSTORE_FAILPOINT=" + fp}, "--json", "add", dirs[0], "--name", "m")
		if o := run.wait(t); o.code != 0 || o.signal != 0 {
			t.Fatalf("add without the failpoints tag, MSTORE_FAILPOINT=%s: %s, want exit 0\n%s", fp, o, run.stderr.String())
		}
	}
	c.add(dirs[1], "--name", "m")
	c.requireCheckout("m", trees[1])
	c.ok("rm", "m") // something for gc to delete
	run = c.start([]string{"MSTORE_FAILPOINT=" + gc.FailAfterCommit}, "gc", "--grace", "0")
	if o := run.wait(t); o.code != 0 || o.signal != 0 {
		t.Fatalf("gc without the failpoints tag, MSTORE_FAILPOINT=%s: %s, want exit 0\n%s", gc.FailAfterCommit, o, run.stderr.String())
	}
	if after := listFiles(t, filepath.Join(c.store, "objects")); len(after) != 0 {
		t.Errorf("gc left %d files under objects/", len(after))
	}
}

package e2e

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/mstore/mstore/internal/remote/pathremote"
)

// TestServeDuringGCAndRepack stops a serve process over a local store
// between its lookup of a pulled blob's record and the read of its file
// (the failpoint), runs a real repack (loose files replaced by coded copies
// in a pack) and a gc that rewrites that pack, then lets serve go on: the
// pull in flight must finish with every byte right, never a 422
// integrity_error for a blob that only moved.
func TestServeDuringGCAndRepack(t *testing.T) {
	t.Parallel()
	dirs, _ := weightModels(t, t.TempDir())
	src := newCLI(t)
	src.add(dirs[0], "--name", "a")
	src.add(dirs[1], "--name", "b")
	srv := startServe(t, src.store, "127.0.0.1:0", []string{"MSTORE_FAILPOINT=" + pathremote.FailAfterLookup + ":stop"})

	dst := newCLI(t)
	dst.ok("init")
	// One request at a time: a stopped serve must hold nothing, and another
	// request stopped inside an index transaction would hold its flock.
	pull := dst.start(nil, "pull", "--jobs", "1", srv.url, "a")
	(&proc{cmd: srv.cmd, done: srv.done}).waitStopped(t)

	var rp repackSummary
	src.json(&rp, "repack")
	if rp.Result.Grouped+rp.Result.Deltas == 0 {
		t.Fatalf("repack coded nothing, so nothing moved: %+v", rp)
	}
	src.ok("rm", "b")
	var gc struct {
		Result struct {
			RepackedPacks int `json:"repacked_packs"`
		} `json:"result"`
	}
	src.json(&gc, "gc", "--grace", "0")
	if gc.Result.RepackedPacks == 0 {
		t.Fatalf("gc rewrote no pack: %+v", gc)
	}
	srv.cmd.Process.Signal(syscall.SIGCONT)

	if o := pull.wait(t); o.code != 0 {
		t.Fatalf("pull while gc and repack moved its blobs: %s\n%s\nserve: %s", o, pull.stderr.String(), srv.log)
	}
	out := filepath.Join(t.TempDir(), "out")
	dst.ok("checkout", "a", out)
	requireSameTree(t, dirs[0], out)
	if rep := dst.fsck(); !rep.OK {
		t.Fatalf("fsck after the pull: %+v", rep)
	}
	if rep := src.fsck(); !rep.OK {
		t.Fatalf("fsck of the served store: %+v", rep)
	}
}

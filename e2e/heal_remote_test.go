package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// flipByte flips one byte in the middle of a store file (they are read-only).
func flipByte(t *testing.T, path string, at int64) {
	t.Helper()
	os.Chmod(path, 0o644)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at] ^= 0x20
	if err := os.WriteFile(path, b, 0o444); err != nil {
		t.Fatal(err)
	}
}

// TestFsckRepairFromRemote: a store whose blobs rotted (one loose, one in a
// pack) and lost a file is healed from a remote; the checkout is
// byte-identical again.
func TestFsckRepairFromRemote(t *testing.T) {
	t.Parallel()
	fx := newRemoteFixture(t)
	a := newCLI(t)
	a.add(fx.base, "--name", "llm")
	remoteDir := filepath.Join(t.TempDir(), "remote")
	a.ok("push", remoteDir, "llm")
	var loose []string
	var pack string
	for _, f := range listFiles(t, filepath.Join(a.store, "objects")) {
		if strings.HasPrefix(f, "packs/") {
			pack = filepath.Join(a.store, "objects", f)
		} else {
			loose = append(loose, filepath.Join(a.store, "objects", f))
		}
	}
	if len(loose) < 2 || pack == "" {
		t.Fatalf("want two loose blobs and a pack, have %v and %q", loose, pack)
	}
	flipByte(t, loose[0], 1000)
	flipByte(t, pack, 100)
	if err := os.Remove(loose[1]); err != nil {
		t.Fatal(err)
	}
	if r := a.run("fsck"); r.code != exitCodes["integrity_error"] {
		t.Fatalf("fsck of the damaged store:\n%s", r)
	}
	if r := a.run("fsck", "--repair", "--from", filepath.Join(t.TempDir(), "no-such-remote")); r.code != exitCodes["not_found"] {
		t.Fatalf("fsck --from a remote that is not there:\n%s", r)
	}
	if r := a.run("fsck", "--from", remoteDir); r.code != exitCodes["schema_error"] {
		t.Fatalf("fsck --from without --repair:\n%s", r)
	}
	var rep fsckReport
	a.json(&rep, "fsck", "--repair", "--from", remoteDir)
	if !rep.OK {
		t.Fatalf("fsck after healing: %+v", rep)
	}
	out := filepath.Join(t.TempDir(), "out")
	a.ok("checkout", "llm", out)
	requireSameTree(t, fx.base, out)
}

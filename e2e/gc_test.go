package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/testenv"
)

// gcOutput is `gc --json`.
type gcOutput struct {
	DryRun bool `json:"dry_run"`
	Plan   struct {
		Manifests       int      `json:"manifests"`
		Reachable       int      `json:"reachable"`
		FreedBlobs      int      `json:"freed_blobs"`
		FreedBytes      int64    `json:"freed_bytes"`
		RemoveManifests []string `json:"remove_manifests"`
		DeleteFiles     []struct {
			Path   string `json:"path"`
			Size   int64  `json:"size"`
			Reason string `json:"reason"`
		} `json:"delete_files"`
		Repacks []struct {
			Path string `json:"path"`
		} `json:"repacks"`
		Orphans     []json.RawMessage `json:"orphans"`
		KeptOrphans []json.RawMessage `json:"kept_orphans"`
		Missing     []string          `json:"missing"`
	} `json:"plan"`
	Result *struct {
		RemovedManifests int      `json:"removed_manifests"`
		FreedBlobs       int      `json:"freed_blobs"`
		FreedBytes       int64    `json:"freed_bytes"`
		DeletedFiles     int      `json:"deleted_files"`
		RepackedPacks    int      `json:"repacked_packs"`
		FailedDeletes    []string `json:"failed_deletes"`
	} `json:"result"`
}

// TestGCTrimFsckCommands: the commands' output, JSON and exit codes, from
// trim through a dry run to a gc that frees what trim and rm let go.
func TestGCTrimFsckCommands(t *testing.T) {
	t.Parallel()
	dirs, trees := crashModels(t, t.TempDir(), 4)
	c := newCLI(t)
	for _, d := range dirs[:3] {
		c.add(d, "--name", "m")
	}
	c.add(dirs[3], "--name", "other")
	c.ok("rm", "other")

	var trimmed []struct {
		Name    string `json:"name"`
		Removed int    `json:"removed"`
		Kept    int    `json:"kept"`
	}
	c.json(&trimmed, "trim", "m", "--keep", "2")
	if len(trimmed) != 1 || trimmed[0].Removed != 1 || trimmed[0].Kept != 2 {
		t.Fatalf("trim --keep 2 of 3 entries: %+v", trimmed)
	}
	if out := c.ok("trim", "--keep", "5", "m"); !strings.Contains(out, "dropped 0") {
		t.Errorf("trim keeping more than there is: %q", out)
	}

	before := listFiles(t, filepath.Join(c.store, "objects"))
	var dry gcOutput
	c.json(&dry, "gc", "--dry-run", "--grace", "0")
	if !dry.DryRun || dry.Result != nil || len(dry.Plan.RemoveManifests) != 2 || dry.Plan.FreedBytes == 0 {
		t.Fatalf("dry run: %+v", dry)
	}
	if after := listFiles(t, filepath.Join(c.store, "objects")); !equalStrings(before, after) {
		t.Fatalf("gc --dry-run changed objects/: %v", diffStrings(before, after))
	}
	text := c.ok("gc", "--dry-run")
	for _, want := range []string{"remove version " + dry.Plan.RemoveManifests[0], "would remove 2 of 4 versions"} {
		if !strings.Contains(text, want) {
			t.Errorf("gc --dry-run does not say %q:\n%s", want, text)
		}
	}

	var done gcOutput
	c.json(&done, "gc", "--grace", "0")
	if done.Result == nil || done.Result.RemovedManifests != 2 || done.Result.FreedBytes != dry.Plan.FreedBytes ||
		done.Result.FreedBlobs != dry.Plan.FreedBlobs || len(done.Result.FailedDeletes) != 0 {
		t.Fatalf("gc did not do what its dry run said:\nplan   %+v\nresult %+v", dry.Plan, done.Result)
	}
	if out := c.ok("gc"); !strings.Contains(out, "removed 0 of 2 versions") {
		t.Errorf("a second gc: %q", out)
	}
	c.requireCheckout("m", trees[2])
	c.requireCheckout("m~1", trees[1])
	c.requireTidy()
	if out := c.ok("fsck"); !strings.HasSuffix(out, "ok\n") {
		t.Errorf("fsck of a clean store: %q", out)
	}

	// A leftover is reported, not an error, and --repair removes it.
	writeFile(t, filepath.Join(c.store, "tmp", "pack-deadbeef"), []byte("half a pack"))
	if rep := c.fsck(); len(rep.Leftovers) != 1 {
		t.Fatalf("leftovers %+v", rep.Leftovers)
	}
	if rep := c.fsck("--repair"); len(rep.Repaired) != 1 {
		t.Fatalf("repaired %+v", rep.Repaired)
	}
	c.requireTidy()

	// Damage is an integrity_error, with the report on stdout.
	corrupt := listFiles(t, filepath.Join(c.store, "objects"))[0]
	p := filepath.Join(c.store, "objects", corrupt)
	os.Chmod(p, 0o644)
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 1
	os.WriteFile(p, b, 0o644)
	r := c.run("--json", "fsck")
	var rep fsckReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != exitCodes["integrity_error"] || rep.OK || len(rep.Corrupt) == 0 {
		t.Fatalf("fsck of a damaged store:\n%s", r)
	}
	if !strings.Contains(r.stderr, "integrity_error") {
		t.Errorf("fsck's error does not name its class:\n%s", r)
	}
	if r := c.run("fsck"); !strings.Contains(r.stdout, "corrupt: ") {
		t.Errorf("fsck does not list the corrupt blob:\n%s", r)
	}
}

func TestGCTrimFsckUsage(t *testing.T) {
	t.Parallel()
	dirs, _ := crashModels(t, t.TempDir(), 1)
	c := newCLI(t)
	c.add(dirs[0], "--name", "m")
	for _, args := range [][]string{
		{"trim", "m"},
		{"trim", "--keep", "2"},
		{"trim", "m", "--keep", "0"},
		{"trim", "bad..name", "--keep", "1"},
		{"gc", "extra"},
		{"gc", "--grace", "soon"},
		{"fsck", "extra"},
	} {
		c.fail("schema_error", args...)
	}
	c.fail("not_found", "trim", "nothing", "--keep", "1")
	other := newCLI(t)
	other.fail("not_found", "gc")
	other.fail("not_found", "fsck")
}

// TestGCFailedDelete: a file gc cannot delete (an immutable directory) makes
// gc fail and name it; the store stays clean, and the next gc deletes it.
func TestGCFailedDelete(t *testing.T) {
	t.Parallel()
	dirs, trees := crashModels(t, t.TempDir(), 2)
	c := newCLI(t)
	c.add(dirs[0], "--name", "keep")
	c.add(dirs[1], "--name", "drop")
	c.ok("rm", "drop")
	packs := filepath.Join(c.store, "objects", "packs")
	if out, err := exec.Command("chattr", "+i", packs).CombinedOutput(); err != nil {
		testenv.Missing(t, "cannot make a directory immutable here (chattr +i needs root and ext4 or the like): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", packs).Run() })

	r := c.run("--json", "gc", "--grace", "0")
	var out gcOutput
	json.Unmarshal([]byte(r.stdout), &out)
	if r.code == 0 || out.Result == nil || len(out.Result.FailedDeletes) != 1 || !strings.Contains(r.stderr, "deletes failed") {
		t.Fatalf("gc that cannot delete a pack:\n%s", r)
	}
	if r := c.run("gc", "--grace", "0"); r.code == 0 || !strings.Contains(r.stdout, "failed to delete") {
		t.Fatalf("gc without --json does not name the file it could not delete:\n%s", r)
	}
	if rep := c.fsck(); len(rep.Leftovers) != 1 {
		t.Fatalf("leftovers %+v, want the pack gc could not delete", rep.Leftovers)
	}
	c.requireCheckout("keep", trees[0])
	if out, err := exec.Command("chattr", "-i", packs).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i: %v: %s", err, out)
	}
	c.ok("gc", "--grace", "0")
	c.requireTidy()
	c.requireCheckout("keep", trees[0])
}

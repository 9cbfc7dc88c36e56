package restorer

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

// die makes w look like the temp directory of a checkout killed with -9:
// the lock file stays, unlocked, and so does the directory.
func die(w *workDir) {
	w.lock.Close()
	w.lock = nil
}

func mustWorkDir(t *testing.T, parent, base string) *workDir {
	t.Helper()
	w, err := newWorkDir(parent, base)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func TestCleanLeftovers(t *testing.T) {
	parent := t.TempDir()

	// Dead while writing: its directory and lock file go.
	dead := mustWorkDir(t, parent, "m")
	os.MkdirAll(filepath.Join(dead.dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dead.dir, "sub", "model.safetensors"), []byte("half"), 0o644)
	die(dead)

	// Alive (its lock held): kept.
	live := mustWorkDir(t, parent, "m")
	os.WriteFile(filepath.Join(live.dir, "model.safetensors"), []byte("busy"), 0o644)
	defer live.close()

	// Dead after the exchange: its directory holds DEST's old tree; the
	// recorded files go, a file someone else put there stays.
	oldTree := func(extra bool) *workDir {
		old := filepath.Join(t.TempDir(), "old")
		os.MkdirAll(filepath.Join(old, "d"), 0o755)
		os.WriteFile(filepath.Join(old, "d", "a"), []byte("a"), 0o644)
		rec, err := recordTree(old)
		if err != nil {
			t.Fatal(err)
		}
		w := mustWorkDir(t, parent, "x")
		if err := w.willReplace(rec); err != nil {
			t.Fatal(err)
		}
		// Stand in for the exchange: the old tree at w's name.
		os.Remove(w.dir)
		if err := os.Rename(old, w.dir); err != nil {
			t.Fatal(err)
		}
		if extra {
			os.WriteFile(filepath.Join(w.dir, "d", "theirs"), []byte("t"), 0o644)
		}
		die(w)
		return w
	}
	replaced, replacedForeign := oldTree(false), oldTree(true)

	// Not provably a checkout's: a folder without a lock file, a lock file
	// mstore did not write, and a directory that is not the one recorded.
	orphan := filepath.Join(parent, tempPrefix+"m-0123456789ab")
	os.Mkdir(orphan, 0o755)
	alien := filepath.Join(parent, tempPrefix+"m-aaaaaaaaaaaa")
	os.Mkdir(alien, 0o755)
	os.WriteFile(alien+lockSuffix, []byte("not ours\n"), 0o644)
	swapped := mustWorkDir(t, parent, "s")
	other := filepath.Join(t.TempDir(), "other") // made while w's exists: another inode
	os.Mkdir(other, 0o755)
	os.WriteFile(filepath.Join(other, "f"), []byte("f"), 0o644)
	os.Remove(swapped.dir)
	if err := os.Rename(other, swapped.dir); err != nil {
		t.Fatal(err)
	}
	die(swapped)

	// A lock file whose checkout was killed before it made its directory.
	bare := mustWorkDir(t, parent, "b")
	os.Remove(bare.dir)
	die(bare)
	os.Truncate(bare.lockPath, 0)

	removed := cleanLeftovers(parent)
	want := []string{dead.dir, dead.lockPath, replaced.dir, replaced.lockPath, bare.lockPath}
	sort.Strings(removed)
	sort.Strings(want)
	if !reflect.DeepEqual(removed, want) {
		t.Fatalf("removed %v\nwant %v", removed, want)
	}
	for _, p := range want {
		if exists(p) {
			t.Errorf("%s is still there", p)
		}
	}
	for _, p := range []string{live.dir, live.lockPath, orphan, alien, alien + lockSuffix, swapped.dir, swapped.lockPath,
		filepath.Join(swapped.dir, "f"), filepath.Join(replacedForeign.dir, "d", "theirs"), replacedForeign.lockPath} {
		if !exists(p) {
			t.Errorf("%s was removed", p)
		}
	}
	if exists(filepath.Join(replacedForeign.dir, "d", "a")) {
		t.Error("the recorded file of the replaced tree that held a foreign one was kept")
	}

	// Once its checkout ends, the live one is cleaned up by close itself.
	live.close()
	if exists(live.dir) || exists(live.lockPath) {
		t.Fatal("close left the temp directory or its lock file")
	}
}

package restorer

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A TempDir whose command died (its lock released without Close, as the
// kernel releases a dead process's flock) is removed by the next TempDir
// in the same folder; one still held is left alone; Close removes its own.
func TestTempDirLeftBehindIsRemovedNextTime(t *testing.T) {
	parent := t.TempDir()
	dead, err := NewTempDir(parent, "layout")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead.Path(), "half-written"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	dead.w.lock.Close() // the process is gone: nobody holds the lock
	live, err := NewTempDir(parent, "layout")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(live.Removed, dead.Path()) {
		t.Fatalf("removed %q, want the dead one's %s", live.Removed, dead.Path())
	}
	if _, err := os.Lstat(dead.Path()); !os.IsNotExist(err) {
		t.Fatalf("the dead one's folder is still there: %v", err)
	}
	other, err := NewTempDir(parent, "layout")
	if err != nil {
		t.Fatal(err)
	}
	if len(other.Removed) != 0 {
		t.Fatalf("a held TempDir was removed: %q", other.Removed)
	}
	live.Close()
	other.Close()
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Fatalf("Close left %v", entries)
	}
}

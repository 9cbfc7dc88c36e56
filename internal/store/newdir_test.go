package store

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mstore/mstore/internal/errs"
)

// TestCreateRefusesAForeignDirectory: a store is made only in a missing or
// empty directory, or one holding only a store's own entries (a create
// that crashed); a directory of other files is a conflict and is left as
// it was.
func TestCreateRefusesAForeignDirectory(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		ok    bool
	}{
		{"missing", nil, true},
		{"empty", []string{}, true},
		{"a crashed create", []string{objectsDir + "/", tmpDir + "/", lockFile}, true},
		{"a fresh file system", []string{"lost+found/"}, true},
		{"a model directory", []string{"config.json", "model.safetensors"}, false},
		{"a dotfile", []string{".bashrc"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "s")
			if tc.files != nil {
				os.Mkdir(dir, 0o755)
			}
			for _, f := range tc.files {
				p := filepath.Join(dir, f)
				if f[len(f)-1] == '/' {
					os.Mkdir(p, 0o755)
				} else {
					os.WriteFile(p, []byte("x"), 0o644)
				}
			}
			_, err := Open(dir, true, Options{})
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if errs.ClassOf(err) != errs.Conflict {
				t.Fatalf("Open: %v, want a conflict", err)
			}
			if _, serr := os.Stat(filepath.Join(dir, indexFile)); serr == nil {
				t.Error("the refused create wrote an index")
			}
			if _, serr := os.Stat(filepath.Join(dir, objectsDir)); serr == nil {
				t.Error("the refused create made objects/")
			}
		})
	}
}

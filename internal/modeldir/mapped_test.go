package modeldir

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/mstore/mstore/internal/errs"
)

// TestOpenFiles: a mapped model reads each of its paths from the file it
// names under the root, only there, and never through a link.
func TestOpenFiles(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "blobs", "sha256-1"), "weights")
	write(t, filepath.Join(root, "blobs", "sha256-2"), "template")
	outside := filepath.Join(t.TempDir(), "secret")
	write(t, outside, "secret")
	symlink(t, outside, filepath.Join(root, "blobs", "sha256-3"))

	d, err := OpenFiles(root, map[string]string{"model.gguf": "blobs/sha256-1", "template": "blobs/sha256-2"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if len(d.Files) != 2 || d.Files[0] != "model.gguf" || d.Files[1] != "template" {
		t.Fatalf("files %q", d.Files)
	}
	f, err := d.Open("model.gguf")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(io.NewSectionReader(f, 0, f.Size()))
	f.Close()
	if string(b) != "weights" {
		t.Fatalf("model.gguf reads %q", b)
	}
	if _, err := d.Stat("blobs/sha256-1"); errs.ClassOf(err) != errs.NotFound {
		t.Errorf("a path the model does not have: %v, want not_found", err)
	}
	for name, c := range map[string]struct {
		files map[string]string
		class errs.Class
	}{
		"a link":             {map[string]string{"model.gguf": "blobs/sha256-3"}, errs.PathTraversal},
		"out of the root":    {map[string]string{"model.gguf": "../secret"}, errs.PathTraversal},
		"an unclean name":    {map[string]string{"../model.gguf": "blobs/sha256-1"}, errs.PathTraversal},
		"a name not UTF-8":   {map[string]string{"model\xff.gguf": "blobs/sha256-1"}, errs.SchemaError},
		"a missing file":     {map[string]string{"model.gguf": "blobs/sha256-9"}, errs.NotFound},
		"a folder, not file": {map[string]string{"model.gguf": "blobs"}, errs.InvalidArchive},
	} {
		if _, err := OpenFiles(root, c.files); errs.ClassOf(err) != c.class {
			t.Errorf("%s: %v, want %v", name, err, c.class)
		}
	}
}

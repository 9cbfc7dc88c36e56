package modeldir

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/testenv"
)

func TestLinksCountsHardLinks(t *testing.T) {
	root := t.TempDir()
	one := filepath.Join(root, "one.bin")
	if err := os.WriteFile(one, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "two.bin"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(root, "two.bin"), filepath.Join(t.TempDir(), "outside.bin")); err != nil {
		testenv.Missing(t, "hard links not supported here: %v", err)
	}
	d, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var lc formats.LinkCounter = d
	for _, c := range []struct {
		path  string
		links int
		class errs.Class
	}{
		{"one.bin", 1, 0},
		{"two.bin", 2, 0},
		{"missing.bin", 0, errs.NotFound},
		{"../one.bin", 0, errs.PathTraversal},
	} {
		t.Run(c.path, func(t *testing.T) {
			n, err := lc.Links(c.path)
			if errs.ClassOf(err) != c.class || n != c.links {
				t.Errorf("Links = %d, %v; want %d, class %v", n, err, c.links, c.class)
			}
		})
	}
}

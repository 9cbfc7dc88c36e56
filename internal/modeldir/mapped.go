package modeldir

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// OpenFiles opens a model whose files are not laid out under their own
// names: files maps each model path to the file under root it is read
// from (an Ollama store's blobs/sha256-… for model.gguf). Both are checked
// as Open checks a directory's names; the files are read only through
// root, never through a link, and must be regular files.
func OpenFiles(root string, files map[string]string) (*Dir, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("modeldir: %w", err)
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("modeldir: %w", err)
	}
	d := &Dir{root: r, rootPath: abs, mapped: map[string]string{}}
	for p, real := range files {
		if err := checkName(p); err != nil {
			r.Close()
			return nil, err
		}
		if !objects.IsCleanPath(real) {
			r.Close()
			return nil, errs.New(errs.PathTraversal, "modeldir", "%s would be read from %q, outside %s", p, real, abs)
		}
		d.mapped[p] = real
		d.Files = append(d.Files, p)
	}
	sort.Strings(d.Files)
	for _, p := range d.Files {
		if _, err := d.Stat(p); err != nil {
			r.Close()
			return nil, err
		}
	}
	return d, nil
}

// realPath is the file under the root that model path p is read from;
// false for a path that a mapped model does not have.
func (d *Dir) realPath(p string) (string, bool) {
	if d.mapped == nil {
		return p, true
	}
	real, ok := d.mapped[p]
	return real, ok
}

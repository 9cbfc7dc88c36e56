package formattest

import (
	"bytes"
	"io/fs"
	"sort"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

// MemDir is an in-memory formats.Dir: a model directory held as a map from
// clean relative slash paths to file contents. Like a real Dir it refuses
// paths that would leave the directory (path_traversal). It never copies the
// bytes it is given, so callers must not change them while it is in use.
type MemDir struct {
	files map[string][]byte
}

// NewMemDir returns a Dir over files. Keys that are not clean relative paths
// make the directory unusable for them: Open and Stat refuse them.
func NewMemDir(files map[string][]byte) *MemDir {
	return &MemDir{files: files}
}

// Open opens the file at p.
func (d *MemDir) Open(p string) (formats.ReadAtCloser, error) {
	b, err := d.lookup(p)
	if err != nil {
		return nil, err
	}
	return memFile{bytes.NewReader(b)}, nil
}

// Stat returns the size of the file at p.
func (d *MemDir) Stat(p string) (int64, error) {
	b, err := d.lookup(p)
	if err != nil {
		return 0, err
	}
	return int64(len(b)), nil
}

// Paths lists every file of the directory, sorted.
func (d *MemDir) Paths() []string {
	out := make([]string, 0, len(d.files))
	for p := range d.files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func (d *MemDir) lookup(p string) ([]byte, error) {
	if !objects.IsCleanPath(p) {
		return nil, errs.New(errs.PathTraversal, "formattest", "path %q is not a clean relative path", p)
	}
	b, ok := d.files[p]
	if !ok {
		return nil, errs.Wrap(errs.NotFound, "formattest", fs.ErrNotExist, "%s", p)
	}
	return b, nil
}

// memFile adds Close to bytes.Reader, which already has ReadAt and Size.
type memFile struct{ *bytes.Reader }

func (memFile) Close() error { return nil }

package mpk

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
)

// extractor writes approved members under a root, and can take back
// everything it wrote.
//
// Every path it is given is a class folder and a checked base name
// (Target); it still goes through os.Root, which refuses to follow any
// link out of the root, so a link planted in the root while the archive
// is extracted cannot redirect a write. Files are created with O_EXCL and
// mode 0644: nothing is overwritten, and no mode, owner or time from the
// archive is applied.
type extractor struct {
	root    *os.Root
	made    map[string]bool // class folders checked or created
	created []string        // in creation order
}

func (x *extractor) create(target string) (*os.File, error) {
	dir := path.Dir(target)
	if !x.made[dir] {
		switch _, err := x.root.Lstat(dir); {
		case errors.Is(err, fs.ErrNotExist):
			if err := x.root.Mkdir(dir, 0o755); err != nil {
				return nil, fmt.Errorf("mpk: extract: %w", err)
			}
			x.created = append(x.created, dir)
		case err != nil:
			return nil, fmt.Errorf("mpk: extract: %w", err)
		}
		x.made[dir] = true
	}
	f, err := x.root.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("mpk: extract: %w", err)
	}
	x.created = append(x.created, target)
	return f, nil
}

// undo removes what create made, newest first.
func (x *extractor) undo() {
	for i := len(x.created) - 1; i >= 0; i-- {
		x.root.Remove(x.created[i])
	}
	x.created = nil
}

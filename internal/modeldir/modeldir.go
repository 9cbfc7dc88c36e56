// Package modeldir reads a model from the filesystem: a single file, or a
// directory whose files are listed once and opened only through an os.Root,
// so that no path named inside the model can leave it.
//
// Links are refused (path_traversal), with one exception: a Hugging Face cache
// snapshot (…/models--ORG--NAME/snapshots/REV/) whose files are symlinks into
// that repo's blobs/ folder; those links are followed, only into it, and
// only while blobs/ is a real directory on the repo's own mount (not a link,
// not a mount of somewhere else). File names must be UTF-8 (schema_error).
package modeldir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

// skippedDirs are folders of tooling, not of the model: a git clone's
// history and huggingface_hub's download metadata.
var skippedDirs = map[string]bool{".git": true, ".cache": true}

// Dir is an opened model directory. It implements formats.Dir.
type Dir struct {
	root     *os.Root
	rootPath string
	// blobs is the HF cache's blobs/ folder when the directory is a cache
	// snapshot whose blobs/ may be followed into, else "".
	blobs string
	// noBlobs says why the links of a cache snapshot are not followed
	// (blobs/ is a link, or a mount), when the directory is one.
	noBlobs string
	// blobsInfo is what blobs/ was when the directory was opened.
	blobsInfo fs.FileInfo
	// Files are the model's regular files, clean slash paths, sorted.
	Files []string
	// Single is true when the model was given as one file, not a directory.
	Single bool
	// mapped, when set (OpenFiles), names the file under root that each
	// model path is read from.
	mapped map[string]string
}

// Open opens the model at p: a directory, or a single file (then the model
// is that one file, and its directory is the root).
func Open(p string) (*Dir, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, fmt.Errorf("modeldir: %w", err)
	}
	info, err := os.Lstat(abs)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errs.New(errs.NotFound, "modeldir", "%s does not exist", p)
		}
		return nil, fmt.Errorf("modeldir: %w", err)
	}
	if info.Mode()&os.ModeSymlink != 0 {
		// A link given by the user on the command line is theirs to give.
		if info, err = os.Stat(abs); err != nil {
			return nil, fmt.Errorf("modeldir: %w", err)
		}
		if abs, err = filepath.EvalSymlinks(abs); err != nil {
			return nil, fmt.Errorf("modeldir: %w", err)
		}
	}
	rootPath, single := abs, ""
	if !info.IsDir() {
		if !info.Mode().IsRegular() {
			return nil, errs.New(errs.InvalidArchive, "modeldir", "%s is not a regular file", p)
		}
		rootPath, single = filepath.Dir(abs), filepath.Base(abs)
	}
	root, err := os.OpenRoot(rootPath)
	if err != nil {
		return nil, fmt.Errorf("modeldir: %w", err)
	}
	d := &Dir{root: root, rootPath: rootPath}
	d.blobs, d.blobsInfo, d.noBlobs = hfBlobsDir(rootPath)
	if single != "" {
		if err := checkName(single); err != nil {
			root.Close()
			return nil, err
		}
		d.Files, d.Single = []string{single}, true
		if _, err := d.Stat(single); err != nil {
			root.Close()
			return nil, err
		}
		return d, nil
	}
	if err := d.list(); err != nil {
		root.Close()
		return nil, err
	}
	return d, nil
}

// hfBlobsDir returns REPO/blobs when dir is REPO/snapshots/REV inside a
// Hugging Face cache (REPO's base name starts with "models--") and blobs/
// is a real directory of REPO: not a link (which could point anywhere) and
// on REPO's own filesystem (a mount could be of anywhere). When dir is a
// snapshot whose blobs/ is not, why says so and blobs is "".
func hfBlobsDir(dir string) (blobs string, info fs.FileInfo, why string) {
	repo, ok := HFSnapshotRepo(dir)
	if !ok {
		return "", nil, ""
	}
	blobs = filepath.Join(repo, "blobs")
	info, err := os.Lstat(blobs)
	switch {
	case err != nil:
		return "", nil, fmt.Sprintf("the cache repo has no readable blobs folder (%v)", err)
	case info.Mode()&os.ModeSymlink != 0:
		return "", nil, blobs + " is a symbolic link, not the repo's own folder"
	case !info.IsDir():
		return "", nil, blobs + " is not a directory"
	}
	repoMount, err := mountOf(repo)
	if err != nil {
		return "", nil, fmt.Sprintf("the cache repo cannot be read (%v)", err)
	}
	blobsMount, err := mountOf(blobs)
	if err != nil {
		return "", nil, fmt.Sprintf("the cache repo's blobs folder cannot be read (%v)", err)
	}
	if blobsMount != repoMount {
		return "", nil, blobs + " is a mount point, not the repo's own folder (a mount of somewhere else)"
	}
	return blobs, info, ""
}

// HFSnapshotRepo returns REPO when dir is REPO/snapshots/REV inside a
// Hugging Face cache (REPO's base name starts with "models--"): the one
// test of what a cache snapshot is, for Open and for the hf-cache layout.
func HFSnapshotRepo(dir string) (repo string, ok bool) {
	snapshots := filepath.Dir(dir)
	repo = filepath.Dir(snapshots)
	if filepath.Base(snapshots) != "snapshots" || !strings.HasPrefix(filepath.Base(repo), "models--") {
		return "", false
	}
	return repo, true
}

// checkName refuses a file name that a manifest cannot hold: not valid
// UTF-8 (schema_error, its bytes escaped), or not a clean relative path
// (path_traversal).
func checkName(p string) error {
	if !utf8.ValidString(p) {
		return errs.New(errs.SchemaError, "modeldir", "file name %s is not valid UTF-8; rename it (only UTF-8 names can be stored)", strconv.Quote(p))
	}
	if !objects.IsCleanPath(p) {
		return errs.New(errs.PathTraversal, "modeldir", "file name %s cannot be stored safely", strconv.Quote(p))
	}
	return nil
}

// Close releases the directory.
func (d *Dir) Close() error { return d.root.Close() }

// Path is the directory's absolute path.
func (d *Dir) Path() string { return d.rootPath }

func (d *Dir) list() error {
	return fs.WalkDir(d.root.FS(), ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("modeldir: %w", err)
		}
		if p == "." {
			return nil
		}
		if e.IsDir() {
			if skippedDirs[e.Name()] {
				return fs.SkipDir
			}
			return checkName(p) // before its files are listed
		}
		if err := checkName(p); err != nil {
			return err
		}
		if _, err := d.Stat(p); err != nil {
			return err
		}
		d.Files = append(d.Files, p)
		return nil
	})
}

// Stat returns the size of the regular file at p, refusing links and
// special files.
func (d *Dir) Stat(p string) (int64, error) {
	info, _, err := d.lstat(p)
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

// Info returns the file info of the regular file at p (for a permitted
// cache link, of the blob it resolves to), refusing links and special
// files as Stat does.
func (d *Dir) Info(p string) (fs.FileInfo, error) {
	info, _, err := d.lstat(p)
	return info, err
}

// Links returns the number of hard links to the regular file at p (for a
// permitted cache link, to the blob it resolves to). It implements
// formats.LinkCounter.
func (d *Dir) Links(p string) (int, error) {
	info, _, err := d.lstat(p)
	if err != nil {
		return 0, err
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int(st.Nlink), nil
	}
	return 1, nil
}

// lstat checks p and returns its file info; for a permitted cache link, the
// info and absolute path of the blob it resolves to.
func (d *Dir) lstat(p string) (info fs.FileInfo, cacheTarget string, err error) {
	if !objects.IsCleanPath(p) {
		return nil, "", errs.New(errs.PathTraversal, "modeldir", "%q leaves the model directory", p)
	}
	real, ok := d.realPath(p)
	if !ok {
		return nil, "", errs.New(errs.NotFound, "modeldir", "%s: no such file in the model read from %s", p, d.rootPath)
	}
	info, err = d.root.Lstat(filepath.FromSlash(real))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, "", errs.New(errs.NotFound, "modeldir", "%s: no such file in %s", p, d.rootPath)
		}
		if isSystemError(err) {
			return nil, "", fmt.Errorf("modeldir: %w", err) // not the path's fault
		}
		return nil, "", errs.Wrap(errs.PathTraversal, "modeldir", err, "%s", p)
	}
	if info.Mode()&os.ModeSymlink != 0 {
		return d.followCacheLink(p)
	}
	if !info.Mode().IsRegular() {
		return nil, "", errs.New(errs.InvalidArchive, "modeldir", "%s is not a regular file (%s)", p, info.Mode().Type())
	}
	return info, "", nil
}

// isSystemError reports whether err is the system's trouble (out of
// descriptors or memory, an I/O error, no permission) rather than a path
// that leaves the directory.
func isSystemError(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.EIO, syscall.EACCES, syscall.EPERM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// followCacheLink allows a symlink only inside an HF cache snapshot, and only
// when it resolves to a regular file directly inside the repo's blobs/.
func (d *Dir) followCacheLink(p string) (fs.FileInfo, string, error) {
	if d.noBlobs != "" {
		return nil, "", errs.New(errs.PathTraversal, "modeldir", "%s is a symbolic link, and links of this cache snapshot are not followed: %s", p, d.noBlobs)
	}
	if d.blobs == "" {
		return nil, "", errs.New(errs.PathTraversal, "modeldir", "%s is a symbolic link; links are refused outside a Hugging Face cache snapshot", p)
	}
	target, err := filepath.EvalSymlinks(filepath.Join(d.rootPath, filepath.FromSlash(p)))
	if err != nil {
		return nil, "", errs.Wrap(errs.PathTraversal, "modeldir", err, "%s: link does not resolve", p)
	}
	// blobs/ is checked again: it must still be the folder Open checked,
	// not a link or mount put in its place since.
	blobsNow, err := os.Lstat(d.blobs)
	if err != nil || !os.SameFile(blobsNow, d.blobsInfo) || blobsNow.Mode()&os.ModeSymlink != 0 {
		return nil, "", errs.New(errs.PathTraversal, "modeldir", "%s: the cache's blobs folder %s changed while the model was read", p, d.blobs)
	}
	blobs, err := filepath.EvalSymlinks(d.blobs)
	if err != nil || filepath.Dir(target) != blobs {
		return nil, "", errs.New(errs.PathTraversal, "modeldir", "%s links outside its cache repo's blobs folder %s", p, d.blobs)
	}
	info, err := os.Lstat(target)
	if err != nil || !info.Mode().IsRegular() {
		return nil, "", errs.New(errs.PathTraversal, "modeldir", "%s links to something that is not a regular file", p)
	}
	targetMount, err1 := mountOf(target)
	blobsMount, err2 := mountOf(d.blobs)
	if err1 != nil || err2 != nil || targetMount != blobsMount {
		return nil, "", errs.New(errs.PathTraversal, "modeldir", "%s links to a file mounted into the cache's blobs folder from somewhere else", p)
	}
	return info, target, nil
}

// Open opens the regular file at p for reading.
func (d *Dir) Open(p string) (formats.ReadAtCloser, error) {
	info, cacheTarget, err := d.lstat(p)
	if err != nil {
		return nil, err
	}
	var f *os.File
	if cacheTarget != "" {
		f, err = os.Open(cacheTarget)
	} else {
		real, _ := d.realPath(p) // lstat found it
		f, err = d.root.Open(filepath.FromSlash(real))
	}
	if err != nil {
		return nil, fmt.Errorf("modeldir: %w", err)
	}
	// What was opened must be what was checked: a file swapped for a link
	// or a device in between is refused.
	st, err := f.Stat()
	if err != nil || !os.SameFile(st, info) {
		f.Close()
		return nil, errs.New(errs.PathTraversal, "modeldir", "%s changed while it was opened", p)
	}
	return &file{File: f, size: st.Size()}, nil
}

type file struct {
	*os.File
	size int64
}

func (f *file) Size() int64 { return f.size }

// SortedFiles returns the files whose names match keep, sorted.
func (d *Dir) SortedFiles(keep func(string) bool) []string {
	var out []string
	for _, f := range d.Files {
		if keep(f) {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

// Ext is the lowercase extension of a slash path ("model.SafeTensors" →
// ".safetensors").
func Ext(p string) string { return strings.ToLower(path.Ext(p)) }

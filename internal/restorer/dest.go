package restorer

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
)

// record is what one checkout wrote: its destination, the directory's
// inode, and every file and directory under it with the metadata that
// changes when anyone writes, replaces or re-links the file. It is kept in
// the store (store.PutCheckoutRecord), never in DEST, whose tree stays
// exactly the model's. `--force` replaces a DEST only when its tree is
// still exactly what its record says.
type record struct {
	Version int            `json:"version"`
	Dest    string         `json:"dest"` // DEST with its parent's links resolved
	Digest  objects.Digest `json:"digest"`
	Dev     uint64         `json:"dev"`
	Ino     uint64         `json:"ino"`
	Entries []entry        `json:"entries"`
}

const recordVersion = 1

// entry is one file or directory of a record, by its slash path under DEST.
type entry struct {
	Path  string `json:"p"`
	Dir   bool   `json:"d,omitempty"`
	Size  int64  `json:"s,omitempty"`
	Mtime int64  `json:"m,omitempty"` // ns
	Ctime int64  `json:"c,omitempty"` // ns; nobody can set it back
	Ino   uint64 `json:"i,omitempty"`
}

// entryOf describes a file as a record does; ok is false for anything a
// checkout does not write (links, devices, fifos).
func entryOf(rel string, info fs.FileInfo) (e entry, ok bool) {
	e.Path = rel
	switch {
	case info.IsDir():
		e.Dir = true
		return e, true
	case !info.Mode().IsRegular():
		return e, false
	}
	st, _ := info.Sys().(*syscall.Stat_t)
	if st == nil {
		return e, false
	}
	e.Size, e.Mtime, e.Ino = info.Size(), info.ModTime().UnixNano(), st.Ino
	e.Ctime = st.Ctim.Sec*1e9 + st.Ctim.Nsec
	return e, true
}

func devIno(info fs.FileInfo) (dev, ino uint64) {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Dev, st.Ino
	}
	return 0, 0
}

// recordTree records every file and directory under root.
func recordTree(root string) (*record, error) {
	info, err := os.Lstat(root)
	if err != nil {
		return nil, fmt.Errorf("checkout: %w", err)
	}
	rec := &record{Version: recordVersion}
	rec.Dev, rec.Ino = devIno(info)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		e, ok := entryOf(filepath.ToSlash(rel), info)
		if !ok {
			return fmt.Errorf("%s is not a file or directory", rel)
		}
		rec.Entries = append(rec.Entries, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checkout: record what was written: %w", err)
	}
	return rec, nil
}

// recordName is the store's name for the record of the checkout whose
// directory is (dev, ino) at dest: a digest of the path, then the inode, so
// that every record of one path shares a prefix.
func recordName(dest string, dev, ino uint64) string {
	return recordPrefix(dest) + fmt.Sprintf("%x.%x", dev, ino)
}

func recordPrefix(dest string) string {
	d := objects.Sum([]byte(dest))
	return hex.EncodeToString(d[:16]) + "."
}

// canonicalDest is dest with the links in its parent resolved, so that two
// spellings of one directory find the same record. The parent must exist.
func canonicalDest(dest string) (string, error) {
	parent, err := filepath.EvalSymlinks(filepath.Dir(dest))
	if err != nil {
		return "", fmt.Errorf("checkout: %w", err)
	}
	return filepath.Join(parent, filepath.Base(dest)), nil
}

// oldDest is a DEST that a checkout may replace: an empty directory (rec
// without entries, no name) or an earlier checkout whose record says it is
// still exactly what that checkout wrote.
type oldDest struct {
	rec  *record
	name string // the store's record name, "" for an empty directory
}

// checkDest decides whether dest may be written: a dest that does not
// exist (nil) or an empty directory always; with force, an earlier
// checkout of this store that nobody has changed since. Anything else is
// refused with conflict, naming what is in the way. key is dest with its
// parent's links resolved (canonicalDest).
func checkDest(st *store.Store, dest, key string, force bool) (*oldDest, error) {
	info, err := os.Lstat(dest)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkout: %w", err)
	}
	if !info.IsDir() {
		return nil, errs.New(errs.Conflict, "checkout", "%s exists and is not a directory; checkout writes a directory and never replaces a file or link (even with --force): remove it or choose another destination", dest)
	}
	dev, ino := devIno(info)
	entries, err := os.ReadDir(dest)
	if err != nil {
		return nil, fmt.Errorf("checkout: %w", err)
	}
	if len(entries) == 0 {
		return &oldDest{rec: &record{Dev: dev, Ino: ino}}, nil
	}
	if !force {
		return nil, errs.New(errs.Conflict, "checkout", "%s exists and is not empty; choose another destination, or pass --force to replace an earlier checkout there", dest)
	}
	name := recordName(key, dev, ino)
	rec, err := loadRecord(st, name, key, dev, ino)
	if errs.ClassOf(err) == errs.NotFound {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return nil, errs.New(errs.Conflict, "checkout", "%s holds files that no checkout from this store wrote (%s); --force replaces only an earlier mstore checkout: move them away or choose another destination",
			dest, listNames(names))
	}
	if err != nil {
		return nil, err
	}
	if err := requireUnchanged(dest, rec); err != nil {
		return nil, err
	}
	return &oldDest{rec: rec, name: name}, nil
}

func loadRecord(st *store.Store, name, key string, dev, ino uint64) (*record, error) {
	b, err := st.CheckoutRecord(name)
	if err != nil {
		return nil, err
	}
	rec := &record{}
	if err := json.Unmarshal(b, rec); err != nil || rec.Version != recordVersion {
		return nil, errs.New(errs.IntegrityError, "checkout", "the store's record of the checkout at %s cannot be read (%v); move that directory away or remove it yourself", key, err)
	}
	if rec.Dest != key || rec.Dev != dev || rec.Ino != ino {
		return nil, errs.New(errs.NotFound, "checkout", "no record of a checkout at %s", key)
	}
	return rec, nil
}

// requireUnchanged refuses (conflict) a tree at root that holds anything
// rec does not list, or a listed file that has changed since: replacing it
// would lose what someone else put there.
func requireUnchanged(root string, rec *record) error {
	foreign, changed, err := compareTree(root, rec)
	if err != nil {
		return err
	}
	switch {
	case len(foreign) > 0 && len(changed) > 0:
		return errs.New(errs.Conflict, "checkout", "%s holds files mstore did not write (%s) and files changed since it wrote them (%s); --force replaces only an unchanged earlier checkout: move them away or choose another destination",
			root, listNames(foreign), listNames(changed))
	case len(foreign) > 0:
		return errs.New(errs.Conflict, "checkout", "%s holds files mstore did not write (%s); --force replaces only an earlier checkout: move them away or choose another destination", root, listNames(foreign))
	case len(changed) > 0:
		return errs.New(errs.Conflict, "checkout", "%s holds files changed since mstore wrote them (%s); replacing them would lose those edits: move them away or choose another destination", root, listNames(changed))
	}
	return nil
}

// compareTree walks root (never following links) and returns, by slash
// path, what rec does not list and the listed files that differ from it.
func compareTree(root string, rec *record) (foreign, changed []string, err error) {
	want := make(map[string]entry, len(rec.Entries))
	for _, e := range rec.Entries {
		want[e.Path] = e
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		got, ok := entryOf(rel, info)
		w, listed := want[rel]
		switch {
		case !ok || !listed || w.Dir != got.Dir:
			foreign = append(foreign, rel)
			if d.IsDir() {
				return filepath.SkipDir // everything under it is foreign too
			}
		case got != w:
			changed = append(changed, rel)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("checkout: %w", err)
	}
	return foreign, changed, nil
}

// removeRecorded removes from root the files rec lists that are still
// exactly as recorded, then the directories left empty, then root. It
// never removes anything else: what it had to leave is returned (slash
// paths under root), and root stays then.
func removeRecorded(root string, rec *record) (kept []string, err error) {
	r, err := os.OpenRoot(root) // no link planted under root leads a removal out of it
	if err != nil {
		return nil, fmt.Errorf("checkout: %w", err)
	}
	defer r.Close()
	// Each directory is opened once and its files removed by name in it:
	// two calls a file, not a walk down the path for each.
	var dirs []string
	files := map[string][]entry{}
	for _, e := range rec.Entries {
		name := filepath.FromSlash(e.Path)
		switch {
		case !filepath.IsLocal(name):
		case e.Dir:
			dirs = append(dirs, name)
		default:
			files[filepath.Dir(name)] = append(files[filepath.Dir(name)], e)
		}
	}
	for dir, list := range files {
		if err := removeFilesIn(r, dir, list); err != nil {
			return nil, err
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) }) // children first
	for _, d := range dirs {
		if info, err := r.Lstat(d); err == nil && info.IsDir() {
			r.Remove(d) // fails, as it should, when something else is inside
		}
	}
	if err := os.Remove(root); err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	kept, _, err = compareTree(root, &record{})
	if err != nil {
		return nil, err
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("checkout: remove %s: %w", root, os.Remove(root))
	}
	return kept, nil
}

// removeFilesIn removes from dir (under r) the files of list that are
// still exactly as recorded.
func removeFilesIn(r *os.Root, dir string, list []entry) error {
	sub, err := r.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checkout: %w", err)
	}
	defer sub.Close()
	for _, e := range list {
		base := path.Base(e.Path)
		info, err := sub.Lstat(base)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("checkout: %w", err)
		}
		if got, ok := entryOf(e.Path, info); !ok || got != e {
			continue // changed since: not ours to remove
		}
		if err := sub.Remove(base); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("checkout: %w", err)
		}
	}
	return nil
}

// listNames quotes up to ten names for a message.
func listNames(names []string) string {
	sort.Strings(names)
	var b strings.Builder
	for i, n := range names {
		if i == 10 {
			fmt.Fprintf(&b, " and %d more", len(names)-10)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", n)
	}
	return b.String()
}

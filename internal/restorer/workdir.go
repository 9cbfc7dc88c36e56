package restorer

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A checkout writes into a temp directory beside DEST,
// PARENT/.mstore-checkout-BASE-RAND, and holds an flock(2) on the lock
// file PARENT/.mstore-checkout-BASE-RAND.lock for as long as it runs. The
// kernel drops the flock when the process dies, however it dies, so a lock
// file nobody holds is proof that its checkout is gone, and the next
// checkout into the same parent removes what it left (cleanLeftovers).
//
// The lock file says what the directory holds, one JSON document a line:
//
//	mstore checkout lock v1
//	{"pid":…,"dir":NAME,"dev":…,"ino":…}   the directory as created
//	{"old":RECORD}                          appended before DEST is swapped in
//
// The third line is there from just before the exchange with DEST: from
// then on the directory may hold DEST's old tree, and only the files that
// record lists may be removed from it. Nothing is removed that the lock
// file does not prove to be a checkout's own: a directory without a lock
// file, or whose inode is not the one recorded, is left alone.
const (
	tempPrefix = ".mstore-checkout-"
	lockSuffix = ".lock"
	lockMagic  = "mstore checkout lock v1"
	// maxLockFile bounds what a leftover lock file is read for (its old
	// record lists every file of the tree it replaced).
	maxLockFile = 1 << 30
)

type lockInfo struct {
	PID int    `json:"pid"`
	Dir string `json:"dir"`
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

type lockReplace struct {
	Old *record `json:"old"`
}

// workDir is a running checkout's temp directory and its held lock file.
type workDir struct {
	dir       string
	lockPath  string
	lock      *os.File
	dev, ino  uint64 // of dir as created
	published bool   // dir no longer holds the new tree
}

// newWorkDir creates the lock file, locks it, and only then creates the
// directory, so that no instant exists at which the directory is there and
// its lock file is not held.
func newWorkDir(parent, base string) (*workDir, error) {
	if len(base) > 180 { // the name is only a hint; keep it under NAME_MAX
		base = base[:180]
	}
	for range 8 {
		var rnd [6]byte
		rand.Read(rnd[:])
		name := tempPrefix + base + "-" + hex.EncodeToString(rnd[:])
		w := &workDir{dir: filepath.Join(parent, name), lockPath: filepath.Join(parent, name+lockSuffix)}
		f, err := os.OpenFile(w.lockPath, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("checkout: %w", err)
		}
		// A cleaner may have taken the new file for a dead one's between
		// the create and the lock: then it holds the lock, or the file is
		// no longer at its name, and it removes the file.
		switch err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); {
		case errors.Is(err, unix.EWOULDBLOCK):
			f.Close()
			continue
		case err != nil:
			// A file system without flock: the directory then has no
			// owner anyone can check, and no later checkout removes it.
			f.Close()
			os.Remove(w.lockPath)
			w.lockPath = ""
			if err := os.Mkdir(w.dir, 0o755); err != nil {
				return nil, fmt.Errorf("checkout: %w", err)
			}
			if err := w.stat(); err != nil {
				os.Remove(w.dir)
				return nil, fmt.Errorf("checkout: %w", err)
			}
			return w, nil
		case !sameFile(f, w.lockPath):
			f.Close()
			continue
		}
		w.lock = f
		if err := os.Mkdir(w.dir, 0o755); err != nil {
			w.dropLock()
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return nil, fmt.Errorf("checkout: %w", err)
		}
		err = w.stat()
		if err == nil {
			line, _ := json.Marshal(lockInfo{PID: os.Getpid(), Dir: name, Dev: w.dev, Ino: w.ino})
			_, err = f.Write(append([]byte(lockMagic+"\n"), append(line, '\n')...))
		}
		if err != nil {
			os.Remove(w.dir)
			w.dropLock()
			return nil, fmt.Errorf("checkout: lock file %s: %w", w.lockPath, err)
		}
		return w, nil
	}
	return nil, fmt.Errorf("checkout: could not create a temp directory in %s", parent)
}

func (w *workDir) stat() error {
	info, err := os.Lstat(w.dir)
	if err != nil {
		return err
	}
	w.dev, w.ino = devIno(info)
	return nil
}

// sameFile reports whether path still names the open file f.
func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(path)
	return err == nil && os.SameFile(a, b)
}

// holdsNewTree reports whether w.dir still is the directory w created.
func (w *workDir) holdsNewTree() bool {
	info, err := os.Lstat(w.dir)
	if err != nil {
		return false
	}
	dev, ino := devIno(info)
	return dev == w.dev && ino == w.ino
}

// willReplace appends old to the lock file, durably, before the exchange.
func (w *workDir) willReplace(old *record) error {
	if w.lock == nil {
		return nil // no lock file: the directory is never judged dead
	}
	line, err := json.Marshal(lockReplace{Old: old})
	if err == nil {
		_, err = w.lock.Write(append(line, '\n'))
	}
	if err == nil {
		err = w.lock.Sync()
	}
	if err != nil {
		return fmt.Errorf("checkout: lock file %s: %w", w.lockPath, err)
	}
	return nil
}

// close removes the temp directory if it still holds the unpublished new
// tree, then the lock file, and releases the lock.
func (w *workDir) close() {
	if !w.published && w.holdsNewTree() {
		os.RemoveAll(w.dir)
	}
	w.dropLock()
}

func (w *workDir) dropLock() {
	if w.lock == nil {
		return
	}
	os.Remove(w.lockPath) // while still held: no cleaner can be between
	w.lock.Close()
	w.lock = nil
}

// cleanLeftovers removes, in parent, what checkouts that are no longer
// running left behind, and returns what it removed. It is best-effort: a
// leftover it cannot judge or remove stays, and the checkout goes on.
func cleanLeftovers(parent string) []string {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, tempPrefix) && strings.HasSuffix(n, lockSuffix) && e.Type().IsRegular() {
			removed = append(removed, cleanLeftover(parent, n)...)
		}
	}
	return removed
}

func cleanLeftover(parent, lockName string) []string {
	lockPath := filepath.Join(parent, lockName)
	f, err := os.Open(lockPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil || !sameFile(f, lockPath) {
		return nil // its checkout is running, or another one is cleaning it
	}
	dirName := strings.TrimSuffix(lockName, lockSuffix)
	dir := filepath.Join(parent, dirName)
	info, derr := os.Lstat(dir)
	gone := errors.Is(derr, fs.ErrNotExist)
	removeLock := func() []string {
		if os.Remove(lockPath) != nil {
			return nil
		}
		return []string{lockPath}
	}

	data, err := io.ReadAll(io.LimitReader(f, maxLockFile))
	if err != nil {
		return nil
	}
	if len(data) == 0 {
		// Killed between creating the lock file and describing the
		// directory: at most an empty directory exists.
		switch {
		case gone:
			return removeLock()
		case derr == nil && info.IsDir() && os.Remove(dir) == nil:
			return append([]string{dir}, removeLock()...)
		}
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxLockFile)
	var li lockInfo
	var lr lockReplace
	if !sc.Scan() || sc.Text() != lockMagic || !sc.Scan() || json.Unmarshal(sc.Bytes(), &li) != nil || li.Dir != dirName {
		return nil // not a lock file mstore wrote: not ours to judge
	}
	if sc.Scan() && (json.Unmarshal(sc.Bytes(), &lr) != nil || lr.Old == nil) {
		return nil
	}
	if gone {
		return removeLock() // killed after its directory was removed
	}
	if derr != nil || !info.IsDir() {
		return nil
	}
	dev, ino := devIno(info)
	switch {
	case dev == li.Dev && ino == li.Ino:
		// Its own new tree, never published: every file in it is mstore's.
		if os.RemoveAll(dir) != nil {
			return nil
		}
	case lr.Old != nil && dev == lr.Old.Dev && ino == lr.Old.Ino:
		// Killed after the exchange: DEST's old tree, of which only what
		// its record lists, unchanged, may go.
		if kept, err := removeRecorded(dir, lr.Old); err != nil || len(kept) > 0 {
			return nil
		}
	default:
		return nil
	}
	return append([]string{dir}, removeLock()...)
}

// TempDir is a directory in a parent folder that a command fills and then
// moves from (a layout's checkout), held as a checkout's own is: while the
// command runs its lock file is locked, and once the command is gone,
// however it died, the next checkout or TempDir in that folder removes it.
type TempDir struct {
	w *workDir
	// Removed is what dead commands had left in the folder, removed
	// before this one was made.
	Removed []string
}

// NewTempDir removes the leftovers of dead checkouts in parent, then makes
// a held temp directory there, named after base.
func NewTempDir(parent, base string) (*TempDir, error) {
	removed := cleanLeftovers(parent)
	w, err := newWorkDir(parent, base)
	if err != nil {
		return nil, err
	}
	return &TempDir{w: w, Removed: removed}, nil
}

// Path is the directory.
func (t *TempDir) Path() string { return t.w.dir }

// Close removes the directory (if it is still the one made) and its lock
// file.
func (t *TempDir) Close() { t.w.close() }

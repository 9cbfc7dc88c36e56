package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mstore/mstore/internal/errs"
)

const lockFile = "lock"

// LockMode says how a command holds the store's lock file. Its zero value is
// invalid.
type LockMode int

const (
	_ LockMode = iota
	// LockShared is held for their whole run by the commands that write or
	// read blobs (add, checkout, fsck): any number at once.
	LockShared
	// LockExclusive is held by the commands that delete files (gc, fsck
	// --repair): alone, so that they never delete what an add has written
	// and not yet recorded, or what a checkout is reading.
	LockExclusive
)

func (m LockMode) String() string {
	switch m {
	case LockShared:
		return "shared"
	case LockExclusive:
		return "exclusive"
	}
	return fmt.Sprintf("LockMode(%d)", int(m))
}

// Lock is a held lock on the store's lock file, taken with flock(2). The
// kernel releases it when the process exits, however it exits (kill -9
// included), so a crashed command never leaves the store locked.
type Lock struct{ f *os.File }

// Lock takes the store's lock in mode, waiting at most wait (zero means
// Options.LockTimeout); a lock still taken then is a conflict.
func (s *Store) Lock(mode LockMode, wait time.Duration) (*Lock, error) {
	how := map[LockMode]int{LockShared: unix.LOCK_SH, LockExclusive: unix.LOCK_EX}[mode]
	if how == 0 {
		return nil, fmt.Errorf("store: lock: invalid mode %v", mode)
	}
	if wait == 0 {
		wait = s.opts.LockTimeout
	}
	path := filepath.Join(s.dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil && mode == LockShared && (errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES)) {
		// A store we may only read: open the lock file read-only (flock
		// needs no write access); if there is none, nobody can gc here.
		if f, err = os.Open(path); errors.Is(err, os.ErrNotExist) {
			return &Lock{}, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("store: lock: %w", err)
	}
	deadline := time.Now().Add(wait)
	pause := 2 * time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return &Lock{f: f}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("store: lock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			if mode == LockExclusive {
				return nil, errs.New(errs.Conflict, "store", "an add, checkout or fsck is running on this store (waited %s); try again when it has finished", wait)
			}
			return nil, errs.New(errs.Conflict, "store", "gc or fsck --repair is running on this store (waited %s); try again when it has finished", wait)
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// Unlock releases the lock; it may be called more than once.
func (l *Lock) Unlock() {
	if l == nil || l.f == nil {
		return
	}
	unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	l.f.Close()
	l.f = nil
}

// Package storetest holds test helpers for code that writes to a store: a
// file system that fails on demand.
package storetest

import (
	"fmt"
	"sync"
	"syscall"

	"github.com/mstore/mstore/internal/store"
)

// Op is a kind of file-system call FaultFS counts.
type Op string

const (
	OpCreate Op = "create"
	OpWrite  Op = "write"
	OpClose  Op = "close"
	OpSyncFS Op = "syncfs"
	OpSync   Op = "syncdir"
	OpRename Op = "rename"
	OpMkdir  Op = "mkdir"
	OpRemove Op = "remove"
)

// FaultFS is the real file system, except that the FailAt-th counted call
// (1-based) fails with Errno. A failing write first writes half its bytes,
// as a full disk does. Remove is counted only when CountRemoves is set, so
// that the cleanup of a failed command is not itself made to fail. Syncs
// are counted (and may fail) but sync nothing: tests never lose power, and
// syncfs on a busy machine is slow.
type FaultFS struct {
	FailAt       int
	Errno        syscall.Errno
	CountRemoves bool

	mu    sync.Mutex
	calls []Op
	fired Op
}

var _ store.FS = (*FaultFS)(nil)

// Calls returns the calls counted so far.
func (f *FaultFS) Calls() []Op {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Op(nil), f.calls...)
}

// Fired returns the kind of call that failed, or "" if none has.
func (f *FaultFS) Fired() Op {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fired
}

// fail counts a call and says whether it must fail.
func (f *FaultFS) fail(op Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, op)
	if len(f.calls) == f.FailAt {
		f.fired = op
		return f.Errno
	}
	return nil
}

func wrap(op Op, name string, err error) error {
	return fmt.Errorf("%s %s: %w", op, name, err)
}

// Create implements store.FS.
func (f *FaultFS) Create(name string) (store.WritableFile, error) {
	if err := f.fail(OpCreate); err != nil {
		return nil, wrap(OpCreate, name, err)
	}
	w, err := store.OSFS{}.Create(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{fs: f, name: name, w: w}, nil
}

// Rename implements store.FS.
func (f *FaultFS) Rename(oldpath, newpath string) error {
	if err := f.fail(OpRename); err != nil {
		return wrap(OpRename, oldpath, err)
	}
	return store.OSFS{}.Rename(oldpath, newpath)
}

// Remove implements store.FS.
func (f *FaultFS) Remove(name string) error {
	if f.CountRemoves {
		if err := f.fail(OpRemove); err != nil {
			return wrap(OpRemove, name, err)
		}
	}
	return store.OSFS{}.Remove(name)
}

// MkdirAll implements store.FS.
func (f *FaultFS) MkdirAll(path string) error {
	if err := f.fail(OpMkdir); err != nil {
		return wrap(OpMkdir, path, err)
	}
	return store.OSFS{}.MkdirAll(path)
}

// SyncFS implements store.FS.
func (f *FaultFS) SyncFS(dir string) error {
	if err := f.fail(OpSyncFS); err != nil {
		return wrap(OpSyncFS, dir, err)
	}
	return nil
}

// SyncDir implements store.FS.
func (f *FaultFS) SyncDir(dir string) error {
	if err := f.fail(OpSync); err != nil {
		return wrap(OpSync, dir, err)
	}
	return nil
}

type faultFile struct {
	fs   *FaultFS
	name string
	w    store.WritableFile
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.fail(OpWrite); err != nil {
		n, _ := f.w.Write(p[:len(p)/2])
		return n, wrap(OpWrite, f.name, err)
	}
	return f.w.Write(p)
}

func (f *faultFile) Close() error {
	if err := f.fs.fail(OpClose); err != nil {
		f.w.Close()
		return wrap(OpClose, f.name, err)
	}
	return f.w.Close()
}

// NoSyncFS is the real file system without syncs: for tests that add many
// models and never lose power.
type NoSyncFS struct{ store.OSFS }

// SyncFS implements store.FS: it does nothing.
func (NoSyncFS) SyncFS(string) error { return nil }

// SyncDir implements store.FS: it does nothing.
func (NoSyncFS) SyncDir(string) error { return nil }

package store

import "os"

// FS is the file-system calls the store's write path makes: writing temp
// files, making them durable, renaming them into place and removing files.
// The store uses the real file system unless Options.FS says otherwise;
// tests give it one that fails the Nth call with EIO or ENOSPC.
//
// Reads (BlobReader, fsck) and the index (bbolt) do not go through FS.
type FS interface {
	// Create creates a new file for writing; it fails if name exists.
	Create(name string) (WritableFile, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	MkdirAll(path string) error
	// SyncFS flushes every dirty page and inode of the file system that
	// holds dir (syncfs(2)): one call makes a whole batch of files durable.
	SyncFS(dir string) error
	// SyncDir makes dir's entries durable.
	SyncDir(dir string) error
}

// WritableFile is a file being written through an FS.
type WritableFile interface {
	Write(p []byte) (int, error)
	Close() error
}

// OSFS is the real file system.
type OSFS struct{}

var _ FS = OSFS{}

// Create implements FS. Files are created read-only: nothing is ever
// modified in place.
func (OSFS) Create(name string) (WritableFile, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
}

// Rename implements FS.
func (OSFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// Remove implements FS.
func (OSFS) Remove(name string) error { return os.Remove(name) }

// MkdirAll implements FS.
func (OSFS) MkdirAll(path string) error { return os.MkdirAll(path, 0o755) }

// SyncFS implements FS.
func (OSFS) SyncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syncfs(f); err != nil {
		return &os.PathError{Op: "syncfs", Path: dir, Err: err}
	}
	return nil
}

// SyncDir implements FS.
func (OSFS) SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// startWriteback asks the kernel to start writing a new file's pages to disk
// now, without waiting, so that the disk works while the add goes on hashing
// and the one sync at commit has little left to do. It changes nothing about
// durability (the sync does that), so its result is ignored; files of other
// FS implementations are left alone.
func startWriteback(f WritableFile) {
	if osf, ok := f.(*os.File); ok {
		startFileWriteback(osf)
	}
}

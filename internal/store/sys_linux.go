//go:build linux

package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncfs makes every dirty page and inode of the file system holding f
// durable (syncfs(2)): one call for a whole batch of files.
func syncfs(f *os.File) error { return unix.Syncfs(int(f.Fd())) }

// startFileWriteback starts writing f's dirty pages without waiting
// (sync_file_range(2) with SYNC_FILE_RANGE_WRITE); a hint, its result is
// ignored.
func startFileWriteback(f *os.File) {
	unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
}

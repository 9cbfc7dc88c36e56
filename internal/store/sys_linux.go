//go:build linux

package store

import (
	"io"
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

// copyRange copies n bytes of src from off to the start of dst, a new
// empty file, in the kernel (copy_file_range(2): on one file system the
// page cache is copied without a pass through user space, and src's file
// offset is left alone). It reports false, dst empty again, when the
// kernel cannot (another file system, an old kernel, src shorter than it
// was): the caller then writes the bytes itself.
func copyRange(src CopySource, off int64, dst *os.File, n int64) (bool, error) {
	in, out := int(src.Fd()), int(dst.Fd())
	var done int64
	for done < n {
		from := off + done
		k, err := unix.CopyFileRange(in, &from, out, nil, int(n-done), 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil || k == 0 {
			break
		}
		done += int64(k)
	}
	if done == n {
		return true, nil
	}
	if err := dst.Truncate(0); err != nil {
		return false, err
	}
	_, err := dst.Seek(0, io.SeekStart)
	return false, err
}

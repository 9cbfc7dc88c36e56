package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ResidentPages counts the pages of path's first n bytes that are in the
// page cache (mincore): the check that a write went past it.
func ResidentPages(t testing.TB, path string, n int) int {
	t.Helper()
	resident := 0
	for _, r := range Residency(t, path)[:(n+os.Getpagesize()-1)/os.Getpagesize()] {
		resident += int(r & 1)
	}
	return resident
}

// Residency is mincore's answer for each page of path: bit 0 set for a
// page in the page cache.
func Residency(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	n := int(fi.Size())
	if n == 0 {
		return nil
	}
	m, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (n+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(n), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	return vec
}

// RequireDirectIO ends t (Missing) where dir's file system has no
// O_DIRECT, or keeps every page in memory anyway (tmpfs).
func RequireDirectIO(t testing.TB, dir string) {
	t.Helper()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	const block = 4096
	buf := make([]byte, 2*block)
	skip := (block - int(uintptr(unsafe.Pointer(&buf[0]))%block)) % block
	p := filepath.Join(dir, ".direct-io-probe")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|unix.O_DIRECT, 0o644)
	if err == nil {
		_, err = f.Write(buf[skip : skip+block])
		f.Close()
		os.Remove(p)
	}
	if errors.Is(err, unix.EINVAL) || fs.Type == unix.TMPFS_MAGIC {
		Missing(t, "a file system with O_DIRECT under %s", dir)
	}
	if err != nil {
		t.Fatal(err)
	}
}

//go:build !linux

package modeldir

import (
	"os"
	"syscall"
)

// mount names the filesystem a file is on (its device: without a mount id
// a bind mount from the same device is not told from its source).
type mount struct{ dev uint64 }

// mountOf returns the mount of path itself (a link is not followed). A
// variable, so that tests can stand in for a mount without privileges.
var mountOf = func(path string) (mount, error) {
	info, err := os.Lstat(path)
	if err != nil {
		return mount{}, err
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return mount{dev: uint64(st.Dev)}, nil
	}
	return mount{}, nil
}

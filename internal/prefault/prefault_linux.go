package prefault

import (
	"os"

	"golang.org/x/sys/unix"

	_ "github.com/mstore/mstore/internal/platform" // system calls: Linux only
)

var pageSize = os.Getpagesize()

// populate is MADV_POPULATE_WRITE over b (whole pages).
func populate(b []byte) { _ = unix.Madvise(b, unix.MADV_POPULATE_WRITE) }

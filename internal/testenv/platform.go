package testenv

// This package relies on Linux system calls (pagecache.go): on another GOOS
// the import stops the build with one clear message (see package platform).
import _ "github.com/mstore/mstore/internal/platform"

package repack

// This package relies on Linux system calls (getrusage, cpu_linux.go): on
// another GOOS the import stops the build with one clear message.
import _ "github.com/mstore/mstore/internal/platform"

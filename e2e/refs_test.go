package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRefsAndTags covers version names: immutable tags, pinned digests that
// must be in the name's history, NAME~N, digest prefixes and log order.
func TestRefsAndTags(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	tmp := t.TempDir()
	var versions []string // acme/llm's moves, oldest first
	for i := range 3 {
		p := writeFile(t, filepath.Join(tmp, fmt.Sprint("v", i), "model.safetensors"), safetensorsFile(smallModel(uint64(20+i)), nil))
		res := c.add(p, "--name", "acme/llm", "-m", fmt.Sprint("version ", i))
		versions = append(versions, res.Digest)
	}
	otherPath := writeFile(t, filepath.Join(tmp, "other", "model.safetensors"), safetensorsFile(smallModel(30), nil))
	other := c.add(otherPath, "--name", "other").Digest

	shown := func(ref string) string {
		t.Helper()
		return c.show(ref).Digest
	}

	t.Run("tags are immutable", func(t *testing.T) {
		var tag struct {
			Digest  string `json:"digest"`
			Created bool   `json:"created"`
		}
		c.json(&tag, "tag", "acme/llm:v1", "acme/llm~2")
		if tag.Digest != versions[0] || !tag.Created {
			t.Errorf("tag acme/llm:v1 at acme/llm~2: %+v, want created at %s", tag, versions[0])
		}
		c.json(&tag, "tag", "acme/llm:v1", versions[0])
		if tag.Digest != versions[0] || tag.Created {
			t.Errorf("tagging again at the same digest: %+v, want a no-op", tag)
		}
		before := c.snapshot()
		msg := c.fail("conflict", "tag", "acme/llm:v1", versions[1])
		if !strings.Contains(msg, "v1") {
			t.Errorf("conflict message does not name the tag: %s", msg)
		}
		c.requireUnchanged(before)
		if got := shown("acme/llm:v1"); got != versions[0] {
			t.Errorf("acme/llm:v1 is %s after a refused re-tag, want %s", got, versions[0])
		}
		c.fail("not_found", "show", "acme/llm:nope")
		c.fail("not_found", "tag", "acme/llm:v9", "no-such-model")
	})

	t.Run("pinned digest must be in the history", func(t *testing.T) {
		if got := shown("acme/llm@" + versions[1]); got != versions[1] {
			t.Errorf("acme/llm@<v1 digest> is %s", got)
		}
		if got := shown("acme/llm@" + versions[0][:12]); got != versions[0] {
			t.Errorf("acme/llm@<v0 prefix> is %s", got)
		}
		// other's digest exists in the store, but not in acme/llm's history.
		if got := shown(other); got != other {
			t.Fatalf("bare digest of other is %s", got)
		}
		c.fail("not_found", "show", "acme/llm@"+other)
		parent := t.TempDir()
		c.fail("not_found", "checkout", "acme/llm@"+other, filepath.Join(parent, "out"))
		if got := dirEntries(t, parent); len(got) != 0 {
			t.Errorf("refused checkout left %v", got)
		}
		c.fail("not_found", "show", "acme/llm@"+strings.Repeat("0", 64))
	})

	t.Run("NAME~N", func(t *testing.T) {
		for n, want := range map[string]string{
			"acme/llm": versions[2], "acme/llm~0": versions[2], "acme/llm~1": versions[1],
			"acme/llm~": versions[1], "acme/llm~2": versions[0],
		} {
			if got := shown(n); got != want {
				t.Errorf("%s is %s, want %s", n, got, want)
			}
		}
		c.fail("not_found", "show", "acme/llm~3")
		dest := filepath.Join(t.TempDir(), "out")
		c.ok("checkout", "acme/llm~1", dest)
		requireSameFile(t, filepath.Join(tmp, "v1", "model.safetensors"), filepath.Join(dest, "model.safetensors"))
	})

	t.Run("digest prefix", func(t *testing.T) {
		for _, n := range []int{8, 12, 64} {
			if got := shown(versions[1][:n]); got != versions[1] {
				t.Errorf("prefix of %d digits resolves to %s, want %s", n, got, versions[1])
			}
		}
		c.fail("not_found", "show", "0123abcd")
	})

	t.Run("log is newest first", func(t *testing.T) {
		var log []logEntry
		c.json(&log, "log", "acme/llm")
		if len(log) != 3 {
			t.Fatalf("log has %d entries, want 3: %+v", len(log), log)
		}
		for i, e := range log {
			want := versions[2-i]
			if e.Digest != want || e.Message != fmt.Sprint("version ", 2-i) {
				t.Errorf("log entry %d: %s %q, want %s %q", i, e.Digest, e.Message, want, fmt.Sprint("version ", 2-i))
			}
		}
		if log[0].Previous != versions[1] || log[2].Previous != "" {
			t.Errorf("log previous digests: %q, %q", log[0].Previous, log[2].Previous)
		}
		out := c.ok("log", "acme/llm")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.Contains(lines[0], versions[2][:12]) || !strings.Contains(lines[2], versions[0][:12]) {
			t.Errorf("log, text form, not newest first:\n%s", out)
		}
		c.fail("not_found", "log", "no-such-model")
	})

	t.Run("ls", func(t *testing.T) {
		var ls []struct {
			Name   string   `json:"name"`
			Digest string   `json:"digest"`
			Tags   []string `json:"tags"`
		}
		c.json(&ls, "ls")
		got := map[string]string{}
		for _, r := range ls {
			got[r.Name] = r.Digest
		}
		if len(got) != 2 || got["acme/llm"] != versions[2] || got["other"] != other {
			t.Errorf("ls: %+v", ls)
		}
	})
}

// TestNoStore: commands that read refuse a store that does not exist, and
// do not create one.
func TestNoStore(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.fail("not_found", "ls")
	c.fail("not_found", "show", "x")
	if _, err := os.Stat(c.store); !os.IsNotExist(err) {
		t.Errorf("a read-only command created the store at %s", c.store)
	}
}

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// flipByte flips one bit in the middle of the blob file of digest d.
func flipByte(t *testing.T, store, d string) {
	t.Helper()
	p := filepath.Join(store, "objects", d[:2], d)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("blob %s: %v", d, err)
	}
	if len(b) == 0 {
		t.Fatalf("blob %s is empty", d)
	}
	b[len(b)/2] ^= 0x40
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptBlob: a flipped byte in any blob makes checkout fail with
// integrity_error and leaves nothing at or beside the destination.
func TestCorruptBlob(t *testing.T) {
	t.Parallel()
	src := smallModelDir(t, filepath.Join(t.TempDir(), "m"), 50)
	cases := []struct {
		name string
		// blob picks the blob to corrupt from the version.
		blob  func(s showResult) string
		extra []string
	}{
		{name: "tensor chunk", blob: func(s showResult) string { return s.Manifest.Tensors[2].Chunks[0] }},
		{name: "tensor chunk, subset checkout", blob: func(s showResult) string { return s.Manifest.Tensors[2].Chunks[0] },
			extra: []string{"--tensors", "model.layers.*"}},
		{name: "header frame", blob: func(s showResult) string {
			for _, f := range s.Manifest.Files {
				if f.Path == "model.safetensors" {
					return f.Extents[0].Data.Chunks[0]
				}
			}
			return ""
		}},
		{name: "config.json", blob: func(s showResult) string {
			for _, f := range s.Manifest.Files {
				if f.Path == "config.json" {
					return f.Extents[0].Data.Chunks[0]
				}
			}
			return ""
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			c.add(src, "--name", "m")
			d := tc.blob(c.show("m"))
			if !isDigest(d) {
				t.Fatalf("test bug: no blob to corrupt (%q)", d)
			}
			flipByte(t, c.store, d)
			parent := t.TempDir()
			msg := c.fail("integrity_error", append([]string{"checkout", "m", filepath.Join(parent, "out")}, tc.extra...)...)
			if !strings.Contains(msg, d[:12]) {
				t.Errorf("message does not name the corrupt blob %s: %s", d[:12], msg)
			}
			if got := dirEntries(t, parent); len(got) != 0 {
				t.Errorf("failed checkout left %v beside the destination", got)
			}

			// A forced checkout over an existing tree fails the same way and
			// leaves that tree as it was.
			dest := filepath.Join(parent, "existing")
			writeFile(t, filepath.Join(dest, "keep.txt"), []byte("mine"))
			c.fail("integrity_error", append([]string{"checkout", "m", dest, "--force"}, tc.extra...)...)
			if got := listFiles(t, dest); !equalStrings(got, []string{"keep.txt"}) {
				t.Errorf("failed forced checkout changed the destination: %v", got)
			}
			if got := dirEntries(t, parent); !equalStrings(got, []string{"existing"}) {
				t.Errorf("failed forced checkout left %v beside the destination", got)
			}
		})
	}
}

// TestDTypeWarning: config.json's torch_dtype disagreeing with the tensors
// is stored but warned about, by add and by show.
func TestDTypeWarning(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	tmp := t.TempDir()
	tensors := []tensor{randTensor("w1", "F32", 60, 32, 32), randTensor("w2", "F32", 61, 32), randTensor("ids", "I64", 62, 8)}
	mismatched := filepath.Join(tmp, "mismatched")
	writeFiles(t, mismatched, map[string][]byte{
		"model.safetensors": safetensorsFile(tensors, nil),
		"config.json":       configJSON("bfloat16"),
	})
	res := c.add(mismatched)
	if len(res.Warnings) == 0 {
		t.Fatalf("add --json of a bfloat16 config with F32 tensors gave no warning: %+v", res)
	}
	if !strings.Contains(res.Warnings[0], "bfloat16") {
		t.Errorf("warning does not name the declared dtype: %q", res.Warnings[0])
	}
	if s := c.show("mismatched"); len(s.Warnings) == 0 {
		t.Errorf("show --json has no warning for the stored version")
	}
	r := c.run("add", mismatched, "--name", "again")
	if r.code != 0 || !strings.Contains(r.stderr, "warning") || !strings.Contains(r.stderr, "bfloat16") {
		t.Errorf("add without --json does not warn on stderr:\n%s", r)
	}
	if out := c.ok("show", "mismatched"); !strings.Contains(out, "bfloat16") {
		t.Errorf("show does not print the warning:\n%s", out)
	}

	matched := filepath.Join(tmp, "matched")
	writeFiles(t, matched, map[string][]byte{
		"model.safetensors": safetensorsFile(tensors, nil),
		"config.json":       configJSON("float32"),
	})
	if res := c.add(matched); res.Warnings == nil || len(res.Warnings) != 0 {
		t.Errorf("add of a matching config: warnings %#v, want []", res.Warnings)
	}
	if s := c.show("matched"); s.Warnings == nil || len(s.Warnings) != 0 {
		t.Errorf("show of a matching config: warnings %#v, want []", s.Warnings)
	}
}

package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// corruptStored flips one bit in the middle of the stored copy of content,
// wherever the store keeps it under objects/ (a file of its own or a run of
// a pack file). The blobs are random enough that content is found once.
func corruptStored(t *testing.T, store string, content []byte) {
	t.Helper()
	var found []string
	for _, rel := range listFiles(t, filepath.Join(store, "objects")) {
		p := filepath.Join(store, "objects", rel)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.Index(b, content)
		if i < 0 {
			continue
		}
		found = append(found, rel)
		b[i+len(content)/2] ^= 0x40
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if len(found) != 1 {
		t.Fatalf("the %d bytes to corrupt are stored raw in %d files under objects/ %v, want 1 "+
			"(if blobs are now compressed or delta-encoded, this test must find them another way)", len(content), len(found), found)
	}
}

// TestCorruptBlob: a flipped byte in any stored blob makes checkout fail
// with integrity_error and leaves nothing at or beside the destination.
func TestCorruptBlob(t *testing.T) {
	t.Parallel()
	tensors := append(smallModel(50), randTensor("big", "U8", 51, 1536<<10)) // small ones and one over 1 MiB
	file := safetensorsFile(tensors, nil)
	cfg := configJSON("float32")
	src := filepath.Join(t.TempDir(), "m")
	writeFiles(t, src, map[string][]byte{"model.safetensors": file, "config.json": cfg, "tokenizer.json": tokenizerJSON()})
	cases := []struct {
		name    string
		content []byte
		extra   []string
	}{
		{name: "small tensor", content: tensors[2].data},
		{name: "small tensor, subset checkout", content: tensors[2].data, extra: []string{"--tensors", "model.layers.*"}},
		{name: "large tensor", content: tensors[len(tensors)-1].data},
		{name: "large tensor, re-sharded", content: tensors[len(tensors)-1].data, extra: []string{"--max-shard-size", "1MB"}},
		{name: "header frame", content: file[:headerSize(t, file)]},
		{name: "config.json", content: cfg},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			c.add(src, "--name", "m")
			parent := t.TempDir()
			dest := filepath.Join(parent, "existing")
			c.ok("checkout", "m", dest) // before the damage: --force may replace it
			corruptStored(t, c.store, tc.content)
			c.fail("integrity_error", append([]string{"checkout", "m", filepath.Join(parent, "out")}, tc.extra...)...)
			if got := dirEntries(t, parent); !equalStrings(got, []string{"existing"}) {
				t.Errorf("failed checkout left %v beside the destination", got)
			}

			// A forced checkout over an earlier one fails the same way and
			// leaves that tree as it was.
			c.fail("integrity_error", append([]string{"checkout", "m", dest, "--force"}, tc.extra...)...)
			if got := readTree(t, dest); !sameTree(got, map[string][]byte{"model.safetensors": file, "config.json": cfg, "tokenizer.json": tokenizerJSON()}) {
				t.Errorf("failed forced checkout changed the destination: %v", listFiles(t, dest))
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

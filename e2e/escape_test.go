package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/formats/gguf"
)

// hostile holds what a terminal acts on: an SGR sequence, BEL, a C1 CSI,
// and a right-to-left override.
const hostile = "evil\x1b[31mred\x07bell\u009b2J\u202eflip"

// requireNoControls fails if human output carries any of hostile's
// controls, or anything else a terminal would act on.
func requireNoControls(t *testing.T, what, out string) {
	t.Helper()
	for _, bad := range []string{"\x1b", "\x07", "\u009b", "\u202e"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s passes %q through to the terminal:\n%q", what, bad, out)
		}
	}
	if !strings.Contains(out, `\x1b[31mred\x07bell\u009b2J\u202eflip`) {
		t.Errorf("%s does not show the escaped name:\n%s", what, out)
	}
}

// TestHumanOutputEscapesControls adds models whose tensor names, key/values
// and chat template, and a commit message, hold terminal controls: show,
// diff, log and ls print them escaped, and --json keeps the exact strings.
func TestHumanOutputEscapesControls(t *testing.T) {
	c := newCLI(t)
	root := t.TempDir()
	name := "w." + hostile
	v1 := filepath.Join(root, "v1")
	writeFiles(t, v1, map[string][]byte{"model.safetensors": safetensorsFile([]tensor{randTensor(name, "F32", 1, 4), randTensor("b", "F32", 2, 2)}, nil)})
	v2 := filepath.Join(root, "v2")
	writeFiles(t, v2, map[string][]byte{"model.safetensors": safetensorsFile([]tensor{randTensor(name, "F32", 3, 4)}, nil)})
	c.ok("add", v1, "--name", "m", "-m", "first "+hostile)
	c.ok("add", v2, "--name", "m", "-m", "second "+hostile)

	requireNoControls(t, "show", c.ok("show", "m"))
	requireNoControls(t, "diff", c.ok("diff", "m~1", "m"))
	requireNoControls(t, "log", c.ok("log", "m"))

	var show struct {
		Manifest struct {
			Tensors []struct{ Name string } `json:"tensors"`
		} `json:"manifest"`
	}
	c.json(&show, "show", "m")
	if len(show.Manifest.Tensors) != 1 || show.Manifest.Tensors[0].Name != name {
		t.Errorf("show --json tensors %q, want the exact name %q", show.Manifest.Tensors, name)
	}
	var log []struct{ Message string }
	c.json(&log, "log", "m")
	if len(log) != 2 || log[0].Message != "second "+hostile || log[1].Message != "first "+hostile {
		t.Errorf("log --json messages %q, want the exact messages", log)
	}
	var diff struct {
		Tensors []struct{ Name string } `json:"tensors"`
	}
	c.json(&diff, "diff", "m~1", "m")
	found := false
	for _, tn := range diff.Tensors {
		found = found || tn.Name == name
	}
	if !found {
		t.Errorf("diff --json does not name %q exactly: %+v", name, diff.Tensors)
	}

	// GGUF: a key, a string value and the chat template (shown whole, on
	// its own lines: its newlines stay, its controls do not).
	kvs := append([]gguf.KV{}, ggufKVs...)
	kvs = append(kvs, gguf.KV{Key: "x." + hostile, Value: gguf.StringValue(hostile)})
	for i := range kvs {
		if kvs[i].Key == "tokenizer.chat_template" {
			kvs[i].Value = gguf.StringValue("{% for m in messages %}\n" + hostile + "\n{% endfor %}")
		}
	}
	g := filepath.Join(root, "g")
	writeFiles(t, g, ggufModel(t, []tensor{randTensor("t", "F32", 4, 4)}, gguf.PlanOptions{KVs: kvs}))
	c.ok("add", g, "--name", "g")
	kvs[len(kvs)-1].Value = gguf.StringValue(hostile + "2")
	g2 := filepath.Join(root, "g2")
	writeFiles(t, g2, ggufModel(t, []tensor{randTensor("t", "F32", 4, 4)}, gguf.PlanOptions{KVs: kvs}))
	c.ok("add", g2, "--name", "g")
	out := c.ok("show", "g")
	requireNoControls(t, "show of GGUF key/values", out)
	if !strings.Contains(out, "{% for m in messages %}\n") {
		t.Errorf("show no longer prints the chat template on its own lines:\n%s", out)
	}
	requireNoControls(t, "diff of GGUF key/values", c.ok("diff", "g~1", "g"))
	ls := c.ok("ls")
	for _, bad := range []string{"\x1b", "\x07", "\u202e"} {
		if strings.Contains(ls, bad) {
			t.Errorf("ls passes %q through:\n%q", bad, ls)
		}
	}
	var details struct {
		Details struct {
			Files []struct {
				KV []struct {
					Key   string `json:"key"`
					Value any    `json:"value"`
				} `json:"kv"`
			} `json:"files"`
		} `json:"details"`
	}
	if err := json.Unmarshal([]byte(c.ok("--json", "show", "g")), &details); err != nil {
		t.Fatal(err)
	}
	exact := false
	for _, f := range details.Details.Files {
		for _, kv := range f.KV {
			exact = exact || kv.Key == "x."+hostile && kv.Value == hostile+"2"
		}
	}
	if !exact {
		t.Errorf("show --json does not carry the exact key/value %q", "x."+hostile)
	}

	// A PyTorch checkpoint whose second name is a view of the first:
	// show lists the views by name.
	pkl := (&pickler{b: []byte{0x80, 2}}).op('}', '(').str("a."+hostile).tensor().op('q', 0).str("b."+hostile).op('h', 0, 'u', '.').b
	pt := writeFile(t, filepath.Join(root, "pt", "model.pt"), torchCheckpointWith(pkl, map[string][]byte{"0": make([]byte, 16)}))
	c.ok("add", pt, "--name", "pt")
	out = c.ok("show", "pt")
	requireNoControls(t, "show of PyTorch views", out)
	if !strings.Contains(out, "views of") {
		t.Errorf("show lists no views:\n%s", out)
	}

	// An error names the file it refuses: escaped on a terminal, exact in
	// JSON.
	bad := writeFile(t, filepath.Join(root, "bad", hostile+".safetensors"), []byte("\x10\x00\x00\x00\x00\x00\x00\x00{not json}"))
	r := c.run("add", bad, "--name", "bad")
	if r.code == 0 {
		t.Fatalf("a broken file was added:\n%s", r)
	}
	requireNoControls(t, "an error message", r.stderr)
	if msg := c.fail("invalid_archive", "add", bad, "--name", "bad"); !strings.Contains(msg, hostile) {
		t.Errorf("the --json error does not carry the exact file name: %q", msg)
	}
}

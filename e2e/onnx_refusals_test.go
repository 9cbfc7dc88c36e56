package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/testenv"
)

// onnxFixture copies burn-onnx-fixtures/external_data.onnx (two tensors at
// offsets 320 and 384 of external_data.bin) into a new folder, with its
// location and offset replaced by strings of the same length (the protobuf
// stays valid), and the data file as data says (nil: none).
func onnxFixture(t *testing.T, location, offset string, data []byte) string {
	t.Helper()
	root := sharedTestdata(t, "onnx")
	model, err := os.ReadFile(filepath.Join(root, "burn-onnx-fixtures", "external_data.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	const origLoc, origOff = "external_data.bin", "320"
	if len(location) != len(origLoc) || len(offset) != len(origOff) {
		t.Fatalf("test bug: %q and %q must keep the lengths of %q and %q", location, offset, origLoc, origOff)
	}
	model = bytes.ReplaceAll(model, []byte(origLoc), []byte(location))
	model = bytes.Replace(model, []byte(origOff), []byte(offset), 1)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "model.onnx"), model)
	if data != nil {
		writeFile(t, filepath.Join(dir, "external_data.bin"), data)
	}
	return dir
}

// TestONNXBadExternalData adds models whose external data is unsafe or
// broken, as a folder and as a single file: each refused with its class,
// and the store unchanged.
func TestONNXBadExternalData(t *testing.T) {
	root := sharedTestdata(t, "onnx")
	data, err := os.ReadFile(filepath.Join(root, "burn-onnx-fixtures", "external_data.bin"))
	if err != nil {
		t.Fatal(err)
	}
	outside := writeFile(t, filepath.Join(t.TempDir(), "secret.bin"), data)
	cases := []struct {
		name  string
		dir   func(t *testing.T) string
		class string
	}{
		{"dot-dot", func(t *testing.T) string { return onnxFixture(t, "../external_d.bin", "320", data) }, "path_traversal"},
		{"dot-dot inside a path", func(t *testing.T) string { return onnxFixture(t, "a/../../xdata.bin", "320", data) }, "path_traversal"},
		{"absolute", func(t *testing.T) string { return onnxFixture(t, "/tmp/external.bin", "320", data) }, "path_traversal"},
		{"drive prefix", func(t *testing.T) string { return onnxFixture(t, "C:/external_d.bin", "320", data) }, "path_traversal"},
		{"backslash", func(t *testing.T) string { return onnxFixture(t, `..\external_d.bin`, "320", data) }, "path_traversal"},
		{"symbolic link", func(t *testing.T) string {
			dir := onnxFixture(t, "external_data.bin", "320", nil)
			if err := os.Symlink(outside, filepath.Join(dir, "external_data.bin")); err != nil {
				testenv.Missing(t, "cannot make a symbolic link here: %v", err)
			}
			return dir
		}, "path_traversal"},
		{"hard link", func(t *testing.T) string {
			dir := onnxFixture(t, "external_data.bin", "320", nil)
			if err := os.Link(outside, filepath.Join(dir, "external_data.bin")); err != nil {
				testenv.Missing(t, "cannot make a hard link here: %v", err)
			}
			return dir
		}, "path_traversal"},
		{"missing data file", func(t *testing.T) string { return onnxFixture(t, "external_data.bin", "320", nil) }, "invalid_archive"},
		{"data file too short", func(t *testing.T) string { return onnxFixture(t, "external_data.bin", "320", data[:390]) }, "invalid_archive"},
		{"offset past the end", func(t *testing.T) string { return onnxFixture(t, "external_data.bin", "999", data) }, "invalid_archive"},
		{"non-numeric offset", func(t *testing.T) string { return onnxFixture(t, "external_data.bin", "3x0", data) }, "schema_error"},
		{"negative offset", func(t *testing.T) string { return onnxFixture(t, "external_data.bin", "-32", data) }, "schema_error"},
	}
	c := newCLI(t)
	c.add(filepath.Join(root, "burn-onnx-mnist.onnx")) // a store with something in it
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &cli{t: t, store: c.store}
			dir := tc.dir(t)
			before := c.snapshot()
			msg := c.fail(tc.class, "add", dir, "--name", "bad")
			c.fail(tc.class, "add", filepath.Join(dir, "model.onnx"), "--name", "bad")
			c.requireUnchanged(before)
			t.Log(msg)
			if !strings.Contains(msg, "external_data.bin") && !strings.Contains(msg, "model.onnx") {
				t.Errorf("message names neither the model nor its data file: %s", msg)
			}
		})
	}
}

// TestONNXCheckoutOptions: conversions and re-layouts that cannot be done
// are refused with their class, before anything is written.
func TestONNXCheckoutOptions(t *testing.T) {
	root := sharedTestdata(t, "onnx")
	c := newCLI(t)
	dir := t.TempDir()
	mnist, err := os.ReadFile(filepath.Join(root, "burn-onnx-mnist.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string][]byte{"mnist.onnx": mnist, "config.json": []byte(`{"task": "digits"}`)})
	m := c.add(dir, "--name", "mnist").Digest
	silero := c.add(filepath.Join(root, "silero_vad.onnx"), "--name", "silero").Digest
	st := c.add(writeFile(t, filepath.Join(t.TempDir(), "w.safetensors"), safetensorsFile(smallModel(3), nil)), "--name", "st").Digest
	dest := func() string { return filepath.Join(t.TempDir(), "out") }

	refusals := []struct {
		name  string
		class string
		args  []string
	}{
		{"a subset of an ONNX graph", "schema_error", []string{m, dest(), "--external-data", "x.data", "--tensors", "conv1.*"}},
		{"external and inline", "schema_error", []string{m, dest(), "--external-data", "x.data", "--inline-data"}},
		{"alignment alone", "schema_error", []string{m, dest(), "--alignment", "4096"}},
		{"alignment with inline", "schema_error", []string{m, dest(), "--inline-data", "--alignment", "4096"}},
		{"alignment not a power of two", "schema_error", []string{m, dest(), "--external-data", "x.data", "--alignment", "48"}},
		{"shard size on ONNX", "schema_error", []string{m, dest(), "--external-data", "x.data", "--max-shard-size", "1MB"}},
		{"data name leaving", "path_traversal", []string{m, dest(), "--external-data", "../x.data"}},
		{"data name in a folder", "path_traversal", []string{m, dest(), "--external-data", "sub/x.data"}},
		{"data name of a model", "schema_error", []string{m, dest(), "--external-data", "other.onnx"}},
		{"data name of another file", "schema_error", []string{m, dest(), "--external-data", "config.json"}},
		{"SafeTensors as ONNX", "unsupported_version", []string{st, dest(), "--format", "onnx"}},
		{"tensors kept in the protobuf", "lossy_conversion", []string{silero, dest(), "--format", "safetensors"}},
	}
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			c := &cli{t: t, store: c.store}
			out := r.args[1]
			c.fail(r.class, append([]string{"checkout"}, r.args...)...)
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("refused checkout left %s (%v)", out, err)
			}
		})
	}

	t.Run("show", func(t *testing.T) {
		c := &cli{t: t, store: c.store}
		var shown struct {
			Details struct {
				Models []struct {
					Path         string `json:"path"`
					IRVersion    string `json:"ir_version"`
					Inside       int    `json:"tensors_inside"`
					FrameTensors string `json:"frame_tensors"`
				} `json:"models"`
			} `json:"details"`
		}
		c.json(&shown, "show", silero)
		if ms := shown.Details.Models; len(ms) != 1 || ms[0].IRVersion != "8" || ms[0].Inside != 344 || ms[0].FrameTensors != "1" {
			t.Errorf("show details %+v", shown.Details)
		}
		if out := c.ok("show", silero); !strings.Contains(out, "kept in the protobuf") {
			t.Errorf("show does not tell of the tensors kept in the protobuf:\n%s", out)
		}
	})
	t.Run("to SafeTensors", func(t *testing.T) {
		out := dest()
		c := &cli{t: t, store: c.store}
		c.ok("checkout", m, out, "--format", "safetensors", "--drop-non-tensors") // the graph is left out
		got := readSafetensors(t, filepath.Join(out, "mnist.safetensors"))
		want := c.show(m)
		if len(got) != len(want.Manifest.Tensors) {
			t.Fatalf("%d tensors, want %d", len(got), len(want.Manifest.Tensors))
		}
		for _, tn := range want.Manifest.Tensors {
			if g, ok := got[tn.Name]; !ok || g.DType != tn.DType || int64(len(g.data)) != tn.Size {
				t.Errorf("tensor %s: %+v", tn.Name, g.DType)
			}
		}
		if b, err := os.ReadFile(filepath.Join(out, "config.json")); err != nil || string(b) != `{"task": "digits"}` {
			t.Errorf("config.json: %q %v", b, err)
		}
	})
	t.Run("to SafeTensors, chosen tensors", func(t *testing.T) {
		out := dest()
		c := &cli{t: t, store: c.store}
		c.ok("checkout", silero, out, "--format", "safetensors", "--tensors", "*", "--drop-non-tensors") // names without a "/"
		want := 0
		for _, tn := range c.show(silero).Manifest.Tensors {
			if !strings.Contains(tn.Name, "/") {
				want++
			}
		}
		if got := readSafetensors(t, filepath.Join(out, "silero_vad.safetensors")); len(got) != want || want == 0 {
			t.Errorf("%d tensors written, want %d", len(got), want)
		}
	})
}

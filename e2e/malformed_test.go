package e2e

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// entry is one tensor of a hand-written header.
func entry(name, dtype, shape string, begin, end int64) string {
	return fmt.Sprintf(`%q:{"dtype":%q,"shape":%s,"data_offsets":[%d,%d]}`, name, dtype, shape, begin, end)
}

// header joins entries into a header object.
func header(entries ...string) string { return "{" + strings.Join(entries, ",") + "}" }

// TestMalformedInputs feeds add broken models: each must be refused with its
// class (in the message and as the exit code) and leave the store as it was.
func TestMalformedInputs(t *testing.T) {
	t.Parallel()
	valid := safetensorsFile(smallModel(40)[:3], nil)
	data16 := randBytes(41, 16)
	data32 := randBytes(42, 32)
	shard := func(tensors ...tensor) []byte { return safetensorsFile(tensors, nil) }
	a, b := randTensor("a", "F32", 43, 4), randTensor("b", "F32", 44, 4)
	idx := func(total int64, weightMap map[string]string) []byte { return indexJSON(total, weightMap) }
	shardName := "model-00001-of-00001.safetensors"

	type files = map[string][]byte
	cases := []struct {
		name  string
		class string
		// file is a single model file (named model.safetensors unless
		// fileName says otherwise); dir is a model directory.
		file     []byte
		fileName string
		dir      files
		// setup makes what files cannot (links); it gets the model dir.
		setup func(t *testing.T, dir string)
		// says is a phrase the message must contain.
		says []string
	}{
		{name: "truncated file", class: "invalid_archive", file: valid[:len(valid)/2]},
		{name: "truncated inside the header", class: "invalid_archive", file: valid[:20]},
		{name: "shorter than the length prefix", class: "invalid_archive", file: []byte{0x10, 0, 0}},
		{name: "empty file", class: "invalid_archive", file: []byte{}},
		{name: "header length over 100 MB", class: "size_limit_exceeded",
			file: append(binary.LittleEndian.AppendUint64(nil, 200_000_000), `{"a":1}`...)},
		{name: "header length past the end of the file", class: "invalid_archive",
			file: append(binary.LittleEndian.AppendUint64(nil, 4096), header(entry("a", "F32", "[4]", 0, 16))...)},
		{name: "header not JSON", class: "schema_error", file: rawSafetensors("this is not JSON at all!", nil)},
		{name: "header JSON array", class: "schema_error", file: rawSafetensors(`[1,2,3]`, nil)},
		{name: "header JSON string", class: "schema_error", file: rawSafetensors(`"a string"`, nil)},
		{name: "header not UTF-8", class: "schema_error",
			file: rawSafetensors(header(entry("a\xff\xfe", "F32", "[4]", 0, 16)), data16)},
		{name: "overlapping offsets", class: "invalid_archive",
			file: rawSafetensors(header(entry("a", "F32", "[4]", 0, 16), entry("b", "F32", "[4]", 8, 24)), data32[:24])},
		{name: "gap between tensors", class: "invalid_archive",
			file: rawSafetensors(header(entry("a", "F32", "[4]", 0, 16), entry("b", "F32", "[4]", 20, 36)), randBytes(45, 36))},
		{name: "first tensor not at 0", class: "invalid_archive",
			file: rawSafetensors(header(entry("a", "F32", "[4]", 4, 20)), randBytes(46, 20))},
		{name: "trailing bytes after the data", class: "invalid_archive", file: append(append([]byte{}, valid...), "extra"...)},
		{name: "data_offsets past the end", class: "invalid_archive",
			file: rawSafetensors(header(entry("a", "F32", "[4]", 0, 16)), data16[:8])},
		{name: "data_offsets end before begin", class: "invalid_archive",
			file: rawSafetensors(header(entry("a", "F32", "[0]", 16, 0)), data16)},
		{name: "duplicate tensor key", class: "schema_error", says: []string{"duplicate"},
			file: rawSafetensors(header(entry("a", "F32", "[4]", 0, 16), entry("a", "F32", "[4]", 16, 32)), data32)},
		{name: "duplicate field in an entry", class: "schema_error", says: []string{"duplicate"},
			file: rawSafetensors(`{"a":{"dtype":"F32","dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, data16)},
		{name: "unknown dtype", class: "unsupported_version", says: []string{"F99"},
			file: rawSafetensors(header(entry("a", "F99", "[4]", 0, 16)), data16)},
		{name: "shape overflow", class: "schema_error",
			file: rawSafetensors(header(entry("a", "F32", "[4294967296,4294967296,16]", 0, 16)), data16)},
		{name: "negative dimension", class: "schema_error",
			file: rawSafetensors(header(entry("a", "F32", "[-4]", 0, 16)), data16)},
		{name: "size mismatch", class: "schema_error",
			file: rawSafetensors(header(entry("a", "F32", "[4]", 0, 12)), data16[:12])},
		{name: "metadata value not a string", class: "schema_error",
			file: rawSafetensors(`{"__metadata__":{"format":1},`+entry("a", "F32", "[4]", 0, 16)+"}", data16)},
		{name: "missing data_offsets", class: "schema_error",
			file: rawSafetensors(`{"a":{"dtype":"F32","shape":[4]}}`, data16)},
		{name: "index names a missing tensor", class: "schema_error", says: []string{"ghost"},
			dir: files{shardName: shard(a, b), "model.safetensors.index.json": idx(32,
				map[string]string{"a": shardName, "b": shardName, "ghost": shardName})}},
		{name: "index misses a tensor", class: "schema_error",
			dir: files{shardName: shard(a, b), "model.safetensors.index.json": idx(16, map[string]string{"a": shardName})}},
		{name: "index total_size wrong", class: "schema_error", says: []string{"total_size"},
			dir: files{shardName: shard(a, b), "model.safetensors.index.json": idx(33,
				map[string]string{"a": shardName, "b": shardName})}},
		{name: "index weight_map leaves the directory", class: "path_traversal",
			dir: files{shardName: shard(a), "model.safetensors.index.json": idx(32,
				map[string]string{"a": shardName, "b": "../x.safetensors"})},
			setup: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "..", "x.safetensors"), shard(b))
			}},
		{name: "index weight_map absolute path", class: "path_traversal",
			dir: files{shardName: shard(a), "model.safetensors.index.json": idx(32,
				map[string]string{"a": shardName, "b": "/tmp/x.safetensors"})}},
		{name: "shard without its index", class: "schema_error",
			dir: files{"model-00001-of-00002.safetensors": shard(a), "model-00002-of-00002.safetensors": shard(b)}},
		{name: "symlinked weights file", class: "path_traversal",
			dir: files{"config.json": configJSON("float32")},
			setup: func(t *testing.T, dir string) {
				target := writeFile(t, filepath.Join(dir, "..", "outside.safetensors"), valid)
				if err := os.Symlink(target, filepath.Join(dir, "model.safetensors")); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "symlinked config.json", class: "path_traversal",
			dir: files{"model.safetensors": valid},
			setup: func(t *testing.T, dir string) {
				target := writeFile(t, filepath.Join(dir, "..", "secret.json"), []byte(`{"secret":true}`))
				if err := os.Symlink(target, filepath.Join(dir, "config.json")); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "Keras HDF5 model", class: "unsupported_version", fileName: "model.h5",
			file: append([]byte("\x89HDF\r\n\x1a\n"), randBytes(47, 504)...), says: []string{"Keras", "code"}},
		{name: "no model container", class: "not_found", says: []string{"no model found in", "looked for *.safetensors, *.gguf"},
			dir: files{"config.json": configJSON("float32"), "README.md": []byte("# nothing here\n")}},
	}

	c := newCLI(t)
	c.add(smallModelDir(t, filepath.Join(t.TempDir(), "good"), 40))
	before := c.snapshot()
	if len(before.objects) == 0 {
		t.Fatal("the good model stored no blob files")
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &cli{t: t, store: c.store}
			model := filepath.Join(t.TempDir(), "models", "bad")
			path := model
			switch {
			case tc.file != nil:
				name := tc.fileName
				if name == "" {
					name = "model.safetensors"
				}
				path = writeFile(t, filepath.Join(model, name), tc.file)
			default:
				if err := os.MkdirAll(model, 0o755); err != nil {
					t.Fatal(err)
				}
				writeFiles(t, model, tc.dir)
			}
			if tc.setup != nil {
				tc.setup(t, model)
			}
			msg := c.fail(tc.class, "add", path, "--name", "bad")
			for _, s := range tc.says {
				if !strings.Contains(msg, s) {
					t.Errorf("message does not say %q: %s", s, msg)
				}
			}
			c.requireUnchanged(before)
		})
	}
	if n := len(cases); n < 15 {
		t.Errorf("only %d malformed inputs", n)
	}
}

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/testenv"
)

// TestRealSafetensors adds every real third-party SafeTensors file and checks
// it out byte-identical.
func TestRealSafetensors(t *testing.T) {
	dir := sharedTestdata(t, "safetensors")
	paths, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		testenv.Missing(t, "%s holds no .safetensors files", dir)
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			res := c.add(p)
			info, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.TrimSuffix(filepath.Base(p), ".safetensors"); res.Name != want {
				t.Errorf("default name %q, want %q", res.Name, want)
			}
			if res.Format != "safetensors" || res.Files != 1 || res.LogicalBytes != info.Size() {
				t.Errorf("add: format %q, %d files, %d logical bytes; want safetensors, 1, %d", res.Format, res.Files, res.LogicalBytes, info.Size())
			}
			if want := len(readSafetensors(t, p)); res.Tensors != want {
				t.Errorf("add: %d tensors, the header has %d", res.Tensors, want)
			}
			dest := filepath.Join(t.TempDir(), "out")
			c.ok("checkout", res.Name, dest)
			if got := dirEntries(t, dest); len(got) != 1 || got[0] != filepath.Base(p) {
				t.Fatalf("checkout wrote %v, want [%s]", got, filepath.Base(p))
			}
			requireSameFile(t, p, filepath.Join(dest, filepath.Base(p)))
		})
	}
}

// smallModelDir writes a one-file model with config.json and tokenizer.json.
func smallModelDir(t *testing.T, dir string, seed uint64) string {
	t.Helper()
	writeFiles(t, dir, map[string][]byte{
		"model.safetensors": safetensorsFile(smallModel(seed), map[string]string{"format": "pt"}),
		"config.json":       configJSON("float32"),
		"tokenizer.json":    tokenizerJSON(),
	})
	return dir
}

// TestAddTwice: adding the same model again stores nothing and does not move
// the ref.
func TestAddTwice(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	src := smallModelDir(t, filepath.Join(t.TempDir(), "llm"), 1)
	first := c.add(src)
	if !first.Moved || first.NewBytes == 0 || first.NewBlobs == 0 {
		t.Errorf("first add: moved=%v new_bytes=%d new_blobs=%d; want a move and new blobs", first.Moved, first.NewBytes, first.NewBlobs)
	}
	if first.Files != 3 || first.Tensors != len(smallModel(1)) {
		t.Errorf("first add: %d files, %d tensors; want 3, %d", first.Files, first.Tensors, len(smallModel(1)))
	}
	before := c.du()
	if before.BlobBytes != first.NewBytes || before.Blobs != first.NewBlobs || before.Versions != 1 {
		t.Errorf("du after one add %+v disagrees with add's new_bytes=%d new_blobs=%d", before, first.NewBytes, first.NewBlobs)
	}

	second := c.add(src)
	if second.Digest != first.Digest {
		t.Errorf("second add digest %s, first %s", second.Digest, first.Digest)
	}
	if second.Moved || second.NewBytes != 0 || second.NewBlobs != 0 {
		t.Errorf("second add: moved=%v new_bytes=%d new_blobs=%d; want no move, nothing new", second.Moved, second.NewBytes, second.NewBlobs)
	}
	after := c.du()
	if after.BlobBytes != before.BlobBytes || after.Blobs != before.Blobs || after.Versions != before.Versions {
		t.Errorf("du changed on the second add:\nbefore %+v\nafter  %+v", before, after)
	}
	var log []logEntry
	c.json(&log, "log", "llm")
	if len(log) != 1 || log[0].Digest != first.Digest {
		t.Errorf("log after adding twice: %+v; want the one first move", log)
	}
}

// TestCanonicalDigest: the same model, moved, renamed, copied in another
// order and with other mtimes, gives the same digest in another store.
func TestCanonicalDigest(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	src := smallModelDir(t, filepath.Join(tmp, "a", "llama-7b"), 2)
	first := newCLI(t).add(src, "--name", "llama")

	moved := filepath.Join(tmp, "elsewhere", "deeper", "renamed-model")
	if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(src, moved); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	for _, f := range listFiles(t, moved) {
		if err := os.Chtimes(filepath.Join(moved, f), old, old); err != nil {
			t.Fatal(err)
		}
	}
	second := newCLI(t).add(moved)
	if second.Name != "renamed-model" {
		t.Errorf("default name %q, want renamed-model", second.Name)
	}
	if second.Digest != first.Digest {
		t.Errorf("moved and renamed model has digest %s, the original %s", second.Digest, first.Digest)
	}

	// A copy whose files were created in the opposite order, with a
	// relative path given on the command line.
	copied := filepath.Join(tmp, "copy")
	files := listFiles(t, moved)
	sort.Sort(sort.Reverse(sort.StringSlice(files)))
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(moved, f))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(copied, f), b)
	}
	c := newCLI(t)
	r := execMstoreIn(t, tmp, nil, "--store", c.store, "--json", "add", "copy", "--name", "other/name")
	if r.code != 0 {
		t.Fatalf("add with a relative path failed:\n%s", r)
	}
	var third addResult
	decodeStrict(t, r, &third)
	if third.Digest != first.Digest {
		t.Errorf("copied model has digest %s, the original %s", third.Digest, first.Digest)
	}
}

// TestSharded adds a sharded model directory, checks it out as added,
// re-sharded and as a subset of its tensors.
func TestSharded(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	tensors := layerTensors(100, 6) // 12 tensors of 16 KiB
	src := filepath.Join(t.TempDir(), "sharded")
	writeFiles(t, src, shardedModel(tensors, 3))
	orig := c.add(src, "--name", "sharded")
	if orig.Files != 6 || orig.Tensors != len(tensors) {
		t.Fatalf("add: %d files, %d tensors; want 6 (3 shards, index, config, tokenizer), %d", orig.Files, orig.Tensors, len(tensors))
	}
	byName := map[string]tensor{}
	for _, tn := range tensors {
		byName[tn.name] = tn
	}
	origShow := c.show("sharded")

	t.Run("as added", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "out")
		c.ok("checkout", "sharded", dest)
		requireSameTree(t, src, dest)
	})

	t.Run("max-shard-size", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "out")
		c.ok("checkout", "sharded", dest, "--max-shard-size", "40KiB")
		// 16 KiB tensors, at most 40 KiB of tensor data per shard: 2 per shard.
		want := []string{"config.json"}
		for k := 1; k <= 6; k++ {
			want = append(want, fmt.Sprintf("model-%05d-of-00006.safetensors", k))
		}
		want = append(want, "model.safetensors.index.json", "tokenizer.json")
		if got := listFiles(t, dest); !equalStrings(got, want) {
			t.Fatalf("re-sharded checkout wrote %v, want %v", got, want)
		}
		for _, f := range []string{"config.json", "tokenizer.json"} {
			requireSameFile(t, filepath.Join(src, f), filepath.Join(dest, f))
		}

		// The index is regenerated from the shards, not copied.
		var idx struct {
			Metadata struct {
				TotalSize int64 `json:"total_size"`
			} `json:"metadata"`
			WeightMap map[string]string `json:"weight_map"`
		}
		b, err := os.ReadFile(filepath.Join(dest, "model.safetensors.index.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &idx); err != nil {
			t.Fatalf("index: %v", err)
		}
		if idx.Metadata.TotalSize != int64(len(tensors))*16384 {
			t.Errorf("index total_size %d, want %d", idx.Metadata.TotalSize, len(tensors)*16384)
		}
		if len(idx.WeightMap) != len(tensors) {
			t.Errorf("index weight_map has %d entries, want %d", len(idx.WeightMap), len(tensors))
		}
		var frames int64
		seen := map[string]bool{}
		for _, f := range want[1:7] {
			body, err := os.ReadFile(filepath.Join(dest, f))
			if err != nil {
				t.Fatal(err)
			}
			frames += headerSize(t, body)
			var data int64
			for name, pt := range readSafetensors(t, filepath.Join(dest, f)) {
				seen[name] = true
				data += int64(len(pt.data))
				if idx.WeightMap[name] != f {
					t.Errorf("index puts %s in %q, it is in %s", name, idx.WeightMap[name], f)
				}
				orig, ok := byName[name]
				if !ok {
					t.Errorf("%s holds unknown tensor %q", f, name)
					continue
				}
				if pt.DType != orig.dtype || !equalShape(pt.Shape, orig.shape) || !bytes.Equal(pt.data, orig.data) {
					t.Errorf("%s: tensor %s differs from the original", f, name)
				}
			}
			if meta := readMetadata(t, filepath.Join(dest, f)); len(meta) != 1 || meta["format"] != "pt" {
				t.Errorf("%s: __metadata__ %v, want the original's {format: pt} (transformers needs it)", f, meta)
			}
			if data > 40<<10 {
				t.Errorf("%s holds %d bytes of tensor data, over --max-shard-size 40KiB", f, data)
			}
		}
		if len(seen) != len(tensors) {
			t.Errorf("the shards hold %d tensors, want %d", len(seen), len(tensors))
		}

		// Added again, the re-sharded model has the same tensors and costs
		// only its new headers and index.
		re := c.add(dest, "--name", "resharded")
		if re.Digest == orig.Digest {
			t.Errorf("re-sharded model has the original's digest")
		}
		if got := c.show("resharded").tensorDigests(); !equalMaps(got, origShow.tensorDigests()) {
			t.Errorf("re-sharded tensors' digests differ from the original's:\n%v\n%v", got, origShow.tensorDigests())
		}
		if wantNew := frames + int64(len(b)) + c.manifestSize(re.Digest); re.NewBytes != wantNew {
			t.Errorf("re-adding the re-sharded model stored %d new bytes, want %d (6 headers, the index and the manifest only)", re.NewBytes, wantNew)
		}
	})

	t.Run("max-shard-size above the total", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "out")
		c.ok("checkout", "sharded", dest, "--max-shard-size", "10GB")
		if got, want := listFiles(t, dest), []string{"config.json", "model.safetensors", "tokenizer.json"}; !equalStrings(got, want) {
			t.Fatalf("checkout into one shard wrote %v, want %v", got, want)
		}
		got := readSafetensors(t, filepath.Join(dest, "model.safetensors"))
		if len(got) != len(tensors) {
			t.Errorf("model.safetensors holds %d tensors, want %d", len(got), len(tensors))
		}
		for name, pt := range got {
			if !bytes.Equal(pt.data, byName[name].data) {
				t.Errorf("tensor %s differs from the original", name)
			}
		}
		if got := c.add(dest, "--name", "merged"); got.Tensors != len(tensors) {
			t.Errorf("the merged model adds as %d tensors", got.Tensors)
		}
		if got := c.show("merged").tensorDigests(); !equalMaps(got, origShow.tensorDigests()) {
			t.Errorf("merged tensors' digests differ from the original's")
		}
	})

	t.Run("tensors", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "out")
		c.ok("checkout", "sharded", dest, "--tensors", "model.layers.1.*", "--tensors", "*.5.mlp.*")
		if got, want := listFiles(t, dest), []string{"config.json", "model.safetensors", "tokenizer.json"}; !equalStrings(got, want) {
			t.Fatalf("subset checkout wrote %v, want %v", got, want)
		}
		got := readSafetensors(t, filepath.Join(dest, "model.safetensors"))
		var names []string
		for name, pt := range got {
			names = append(names, name)
			if orig := byName[name]; !bytes.Equal(pt.data, orig.data) || pt.DType != orig.dtype {
				t.Errorf("tensor %s differs from the original", name)
			}
		}
		sort.Strings(names)
		want := []string{"model.layers.1.mlp.down_proj.weight", "model.layers.1.self_attn.q_proj.weight", "model.layers.5.mlp.down_proj.weight"}
		if !equalStrings(names, want) {
			t.Errorf("subset holds %v, want %v", names, want)
		}

		c.fail("not_found", "checkout", "sharded", filepath.Join(t.TempDir(), "none"), "--tensors", "no.such.*")
	})
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestCheckoutDestination: an existing non-empty destination is refused
// without --force; --force replaces an earlier checkout but never a
// directory holding other files, nor a file.
func TestCheckoutDestination(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	src := smallModelDir(t, filepath.Join(t.TempDir(), "m"), 3)
	c.add(src)
	parent := t.TempDir()
	dest := filepath.Join(parent, "dest")
	writeFile(t, filepath.Join(dest, "keep.txt"), []byte("mine"))

	c.fail("conflict", "checkout", "m", dest)
	msg := c.fail("conflict", "checkout", "m", dest, "--force")
	if !strings.Contains(msg, "keep.txt") {
		t.Errorf("the refusal does not name keep.txt: %s", msg)
	}
	if got := listFiles(t, dest); !equalStrings(got, []string{"keep.txt"}) {
		t.Errorf("refused checkout changed the destination: %v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "keep.txt")); string(b) != "mine" {
		t.Errorf("refused checkout changed keep.txt: %q", b)
	}
	if got := dirEntries(t, parent); !equalStrings(got, []string{"dest"}) {
		t.Errorf("refused checkout left %v beside the destination", got)
	}

	file := writeFile(t, filepath.Join(parent, "a-file"), []byte("x"))
	c.fail("conflict", "checkout", "m", file)
	c.fail("conflict", "checkout", "m", file, "--force")

	out := filepath.Join(parent, "out")
	c.ok("checkout", "m", out)
	c.ok("checkout", "m", out, "--force")
	requireSameTree(t, src, out)
	if got := dirEntries(t, parent); !equalStrings(got, []string{"a-file", "dest", "out"}) {
		t.Errorf("forced checkout left %v beside the destination", got)
	}

	empty := filepath.Join(parent, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	c.ok("checkout", "m", empty)
	requireSameTree(t, src, empty)
}

// TestFlagsAfterArguments: flags work after the arguments, as in git;
// --quiet prints only the digest; MSTORE_DIR works like --store.
func TestFlagsAfterArguments(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	src := smallModelDir(t, filepath.Join(t.TempDir(), "m"), 4)

	r := execMstore(t, nil, "add", src, "--name", "x", "--json", "--store", c.store, "-m", "first")
	if r.code != 0 {
		t.Fatalf("add with flags after the path failed:\n%s", r)
	}
	var res addResult
	decodeStrict(t, r, &res)
	if res.Name != "x" || !isDigest(res.Digest) {
		t.Errorf("add --name x after the path: name %q digest %q", res.Name, res.Digest)
	}

	r = execMstore(t, nil, "add", src, "--quiet", "--store", c.store, "--name", "y")
	if r.code != 0 {
		t.Fatalf("add --quiet failed:\n%s", r)
	}
	if r.stdout != res.Digest+"\n" || r.stderr != "" {
		t.Errorf("add --quiet: want only the digest on stdout and nothing on stderr\n%s", r)
	}

	var log []logEntry
	r = execMstore(t, []string{"MSTORE_DIR=" + c.store}, "log", "x", "--json")
	if r.code != 0 {
		t.Fatalf("log with MSTORE_DIR failed:\n%s", r)
	}
	decodeStrict(t, r, &log)
	if len(log) != 1 || log[0].Message != "first" {
		t.Errorf("log x: %+v, want one move with message \"first\"", log)
	}

	dest := filepath.Join(t.TempDir(), "out")
	r = execMstore(t, nil, "checkout", "y", dest, "--store", c.store, "--json")
	if r.code != 0 {
		t.Fatalf("checkout with flags after the arguments failed:\n%s", r)
	}
	requireSameTree(t, src, dest)
}

// logEntry is one entry of `log --json`.
type logEntry struct {
	Seq      uint64 `json:"seq"`
	Digest   string `json:"digest"`
	Previous string `json:"previous"`
	Message  string `json:"message"`
}

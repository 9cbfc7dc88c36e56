package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestEdgeTensors round-trips tensors at the edges: a scalar, an empty
// tensor, one of exactly one chunk, one a byte over, and the same bytes
// under two names (stored once).
func TestEdgeTensors(t *testing.T) {
	t.Parallel()
	const chunk = 4 << 20
	oneChunk := randTensor("exactly.one.chunk", "U8", 70, chunk)
	dup := oneChunk
	dup.name = "same.bytes.other.name"
	tensors := []tensor{
		randTensor("scalar", "F32", 71),
		randTensor("empty", "F16", 72, 0, 5),
		oneChunk,
		randTensor("one.chunk.and.a.byte", "U8", 73, chunk+1),
		randTensor("bools", "BOOL", 74, 3),
		dup,
	}
	file := safetensorsFile(tensors, map[string]string{"format": "pt", "note": "ünïcode ✓"})
	src := writeFile(t, filepath.Join(t.TempDir(), "edge", "model.safetensors"), file)

	c := newCLI(t)
	res := c.add(src, "--name", "edge")
	var unique int64
	for _, tn := range tensors[:5] {
		unique += tn.size()
	}
	if want := unique + headerSize(t, file) + c.manifestSize(res.Digest); res.NewBytes != want {
		t.Errorf("new_bytes %d, want %d: the header, each distinct tensor once and the manifest", res.NewBytes, want)
	}
	s := c.show("edge")
	chunks := map[string]int{}
	digests := map[string]string{}
	for _, tn := range s.Manifest.Tensors {
		chunks[tn.Name] = len(tn.Chunks)
		digests[tn.Name] = tn.Digest
	}
	for name, want := range map[string]int{"scalar": 1, "empty": 0, "exactly.one.chunk": 1, "one.chunk.and.a.byte": 2} {
		if chunks[name] != want {
			t.Errorf("tensor %s has %d chunks, want %d", name, chunks[name], want)
		}
	}
	if digests["exactly.one.chunk"] != digests["same.bytes.other.name"] {
		t.Errorf("the same bytes under two names have two digests")
	}

	dest := filepath.Join(t.TempDir(), "out")
	c.ok("checkout", "edge", dest)
	requireSameFile(t, src, filepath.Join(dest, "model.safetensors"))

	// Re-laid-out, the metadata and every tensor survive.
	sub := filepath.Join(t.TempDir(), "sub")
	c.ok("checkout", "edge", sub, "--tensors", "*")
	got := readSafetensors(t, filepath.Join(sub, "model.safetensors"))
	for _, tn := range tensors {
		if pt, ok := got[tn.name]; !ok || string(pt.data) != string(tn.data) || !equalShape(pt.Shape, tn.shape) {
			t.Errorf("re-laid-out checkout lost or changed tensor %s", tn.name)
		}
	}
}

// TestOtherFiles: a model directory's other files, empty or in
// subfolders, come back byte for byte.
func TestOtherFiles(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "m")
	writeFiles(t, src, map[string][]byte{
		"model.safetensors":       safetensorsFile(smallModel(80), nil),
		"config.json":             configJSON("float32"),
		"generation_config.json":  []byte(`{"do_sample": true}` + "\n"),
		"added_tokens.json":       {},
		"tokenizer/vocab.txt":     []byte("a\nb\nc\n"),
		"tokenizer/merges.txt":    randBytes(81, 5<<20), // more than one chunk
		"README.md":               []byte("# model\n"),
		"original/params.bin.txt": []byte("not weights\n"),
	})
	c := newCLI(t)
	res := c.add(src)
	if res.Files != 8 {
		t.Errorf("add: %d files, want 8", res.Files)
	}
	dest := filepath.Join(t.TempDir(), "out")
	c.ok("checkout", "m", dest)
	requireSameTree(t, src, dest)
}

// TestHFCacheSnapshot: the symlinks of a Hugging Face cache snapshot are
// followed into the repo's blobs/ folder (giving the files and tensors of
// the same model as plain files; the manifest records the hub revision
// besides), and a link out of blobs/ is refused.
func TestHFCacheSnapshot(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	plain := smallModelDir(t, filepath.Join(tmp, "plain"), 90)
	repo := filepath.Join(tmp, "hub", "models--acme--llm")
	snap := filepath.Join(repo, "snapshots", "0123456789abcdef")
	for i, f := range listFiles(t, plain) {
		b, err := os.ReadFile(filepath.Join(plain, f))
		if err != nil {
			t.Fatal(err)
		}
		blob := writeFile(t, filepath.Join(repo, "blobs", fmt.Sprintf("blob%02d", i)), b)
		if err := os.MkdirAll(filepath.Join(snap, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(filepath.Join(snap, filepath.Dir(f)), blob)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(rel, filepath.Join(snap, f)); err != nil {
			t.Fatal(err)
		}
	}
	c := newCLI(t)
	c.add(plain, "--name", "plain")
	c.add(snap, "--name", "acme/llm")
	files := func(s showResult) (out []string) {
		for _, f := range s.Manifest.Files {
			out = append(out, f.Path+" "+f.Digest)
		}
		return out
	}
	want, got := c.show("plain"), c.show("acme/llm")
	if !equalStrings(files(got), files(want)) || fmt.Sprint(got.tensorDigests()) != fmt.Sprint(want.tensorDigests()) {
		t.Errorf("cache snapshot files %v, the plain files' %v", files(got), files(want))
	}
	dest := filepath.Join(tmp, "out")
	c.ok("checkout", "acme/llm", dest)
	requireSameTree(t, plain, dest)

	before := c.snapshot()
	outside := writeFile(t, filepath.Join(tmp, "outside.json"), []byte(`{}`))
	if err := os.Symlink(outside, filepath.Join(snap, "extra.json")); err != nil {
		t.Fatal(err)
	}
	c.fail("path_traversal", "add", snap, "--name", "acme/llm")
	c.requireUnchanged(before)
}

// TestAddTagConflict: an add whose --tag exists at another digest is refused
// and changes nothing: the ref does not move and no blob is left behind.
func TestAddTagConflict(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	tmp := t.TempDir()
	v1 := c.add(smallModelDir(t, filepath.Join(tmp, "v1"), 100), "--name", "llm", "--tag", "v1")
	if v1.Tag != "v1" {
		t.Errorf("add --tag v1: tag %q", v1.Tag)
	}
	before := c.snapshot()
	v2 := smallModelDir(t, filepath.Join(tmp, "v2"), 101)
	c.fail("conflict", "add", v2, "--name", "llm", "--tag", "v1")
	c.requireUnchanged(before)
	if got := c.show("llm").Digest; got != v1.Digest {
		t.Errorf("llm moved to %s on a refused add", got)
	}

	// Adding it again without the tag stores it, and says so.
	res := c.add(v2, "--name", "llm")
	after := c.du()
	if got := after.BlobBytes - before.du.BlobBytes; res.NewBytes != got || got == 0 {
		t.Errorf("add after a refused add: new_bytes=%d, but the store's blobs grew by %d", res.NewBytes, got)
	}
}

// TestConcurrentAdds: adds running at the same time into one store all
// land, each as one move of the ref, and every version checks out.
func TestConcurrentAdds(t *testing.T) {
	t.Parallel()
	c := newRaceCLI(t)
	c.ok("init", c.store)
	tmp := t.TempDir()
	const n = 4
	srcs := make([]string, n)
	for i := range srcs {
		srcs[i] = smallModelDir(t, filepath.Join(tmp, fmt.Sprint("v", i)), 110+uint64(i))
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range srcs {
		wg.Go(func() {
			results[i] = c.run("--json", "add", srcs[i], "--name", "llm")
		})
	}
	wg.Wait()
	digests := map[string]string{}
	for i, r := range results {
		if r.code != 0 {
			t.Fatalf("concurrent add %d failed:\n%s", i, r)
		}
		var res addResult
		decodeStrict(t, r, &res)
		digests[res.Digest] = srcs[i]
	}
	var log []logEntry
	c.json(&log, "log", "llm")
	if len(log) != n || len(digests) != n {
		t.Fatalf("log has %d entries for %d distinct versions, want %d", len(log), len(digests), n)
	}
	for _, e := range log {
		dest := filepath.Join(t.TempDir(), "out")
		c.ok("checkout", "llm@"+e.Digest, dest)
		requireSameTree(t, digests[e.Digest], dest)
	}
}

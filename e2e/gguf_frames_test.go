package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGGUFSplitReaddSharesTokenizer: a split of a stored GGUF, added again,
// stores only its small header frames and its manifest (≤ 64 KiB): the
// tokenizer's arrays are frames of their own, shared with the first
// version, and the manifest keeps them by reference. Both versions still
// check out byte for byte, re-lay out (merge) to the original file, show
// the tokenizer, and diff says it did not change.
func TestGGUFSplitReaddSharesTokenizer(t *testing.T) {
	t.Parallel()
	src := filepath.Join(sharedTestdata(t, "gguf"), "llama-2-tiny-random.gguf")
	want, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	c := newCLI(t)
	whole := c.add(src, "--name", "tiny")
	split := filepath.Join(t.TempDir(), "split")
	c.ok("checkout", "tiny", split, "--split-max-tensors", "4")
	res := c.add(split, "--name", "tiny-split")
	if res.Files != 3 {
		t.Fatalf("the split added as %d files", res.Files)
	}
	if res.NewBytes > 64<<10 {
		t.Fatalf("re-adding a split of a stored GGUF stored %d new bytes (%d blobs), want ≤ 64 KiB", res.NewBytes, res.NewBlobs)
	}
	if whole.NewBytes > int64(len(want))+64<<10 {
		t.Errorf("the first add stored %d bytes for a %d-byte file: the manifest repeats the tokenizer", whole.NewBytes, len(want))
	}

	back := filepath.Join(t.TempDir(), "back")
	c.ok("checkout", "tiny-split", back)
	if !sameTree(readTree(t, back), readTree(t, split)) {
		t.Fatal("the split does not come back byte for byte")
	}
	merged := filepath.Join(t.TempDir(), "merged")
	c.ok("checkout", "tiny-split", merged, "--split-max-tensors", "1000")
	got, err := os.ReadFile(filepath.Join(merged, "llama-2-tiny-random.gguf"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the split merged again is not the original file (%v)", err)
	}

	out := c.ok("show", "tiny-split")
	for _, w := range []string{"tokenizer.ggml.tokens", "arr[str,32000]", `"<unk>", "<s>"`, "arr[f32,32000]"} {
		if !strings.Contains(out, w) {
			t.Errorf("show does not print %s:\n%s", w, out)
		}
	}
	if out := c.ok("diff", "tiny", "tiny-split"); !strings.Contains(out, "the tokenizer key/values are unchanged") {
		t.Errorf("diff of a split and its whole file:\n%s", out)
	}
	c.ok("fsck")
}

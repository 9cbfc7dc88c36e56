package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hubSnapshot writes revision rev of repo (models--ORG--NAME) into the
// cache hub as huggingface_hub does: each file a blob named by the
// SHA-256 of its bytes, linked relatively from snapshots/REV.
func hubSnapshot(t *testing.T, hub, repo, rev string, files map[string][]byte) string {
	t.Helper()
	snap := filepath.Join(hub, repo, "snapshots", rev)
	for p, b := range files {
		sum := sha256.Sum256(b)
		name := hex.EncodeToString(sum[:])
		writeFile(t, filepath.Join(hub, repo, "blobs", name), b)
		link := filepath.Join(snap, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(strings.Repeat("../", strings.Count(p, "/")+2)+"blobs/"+name, link); err != nil {
			t.Fatal(err)
		}
	}
	return snap
}

// rev is a hub-like revision (40 hex digits) made of s.
func rev(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:20])
}

type layoutSummary struct {
	Layout   string      `json:"layout"`
	Versions []addResult `json:"versions"`
	Failed   []struct {
		Name, Path, Class, Error string
	} `json:"failed"`
	LogicalBytes int64 `json:"logical_bytes"`
	NewBytes     int64 `json:"new_bytes"`
	SavedBytes   int64 `json:"saved_bytes"`
	NewBlobs     int   `json:"new_blobs"`
}

// versions maps NAME:TAG to digest.
func (s layoutSummary) versions() map[string]string {
	out := map[string]string{}
	for _, v := range s.Versions {
		out[v.Name+":"+v.Tag] = v.Digest
	}
	return out
}

// TestHFCache: a synthetic hub of two repos with two revisions each is
// added in one command (one version per revision, tagged with it, the ref
// ending at refs/main, the dedup across revisions saving bytes); log and
// show name the hub revision; each version checks out byte-identical to
// its snapshot, and in cache layout to a hub that a second store reads
// back to the same digests. A snapshot whose link leaves blobs/, and a
// repo whose blobs/ is a link, are refused (path_traversal) while the
// rest of their hub is added.
func TestHFCache(t *testing.T) {
	t.Parallel()
	hub := filepath.Join(t.TempDir(), "hub")
	tensors := smallModel(41)
	base := map[string][]byte{"model.safetensors": safetensorsFile(tensors, nil), "config.json": configJSON("float32"), "tokenizer.json": tokenizerJSON()}
	tuned := append([]tensor{}, tensors...)
	tuned[2] = randTensor(tuned[2].name, tuned[2].dtype, 777, tuned[2].shape...)
	next := map[string][]byte{"model.safetensors": safetensorsFile(tuned, nil), "config.json": base["config.json"], "tokenizer.json": base["tokenizer.json"]}
	gguf, err := os.ReadFile(filepath.Join(sharedTestdata(t, "gguf"), "llama-2-tiny-random.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	snaps := map[string]string{
		"acme/llm:" + rev("llm1"): hubSnapshot(t, hub, "models--acme--llm", rev("llm1"), base),
		"acme/llm:" + rev("llm2"): hubSnapshot(t, hub, "models--acme--llm", rev("llm2"), next),
		"tiny/gguf:" + rev("g1"):  hubSnapshot(t, hub, "models--tiny--gguf", rev("g1"), map[string][]byte{"model.gguf": gguf}),
		"tiny/gguf:" + rev("g2"):  hubSnapshot(t, hub, "models--tiny--gguf", rev("g2"), map[string][]byte{"model.gguf": gguf, "README.md": []byte("# tiny\n")}),
	}
	// refs/main names the older llm revision: the ref must end there.
	writeFile(t, filepath.Join(hub, "models--acme--llm", "refs", "main"), []byte(rev("llm1")))

	c := newCLI(t)
	var sum layoutSummary
	c.json(&sum, "add", hub)
	got := sum.versions()
	if sum.Layout != "hf-cache" || len(got) != 4 || len(sum.Failed) != 0 {
		t.Fatalf("add of the hub: %+v", sum)
	}
	for ref := range snaps {
		if got[ref] == "" {
			t.Fatalf("no version %s in %v", ref, got)
		}
	}
	if sum.SavedBytes <= 0 || sum.SavedBytes != sum.LogicalBytes-sum.NewBytes {
		t.Errorf("saved %d of %d logical (%d new): the revisions share most bytes", sum.SavedBytes, sum.LogicalBytes, sum.NewBytes)
	}
	if cur := c.show("acme/llm").Digest; cur != got["acme/llm:"+rev("llm1")] {
		t.Errorf("acme/llm is at %s, want refs/main's revision %s", cur, rev("llm1"))
	}
	if log := c.ok("log", "acme/llm"); !strings.Contains(log, "revision "+rev("llm1")+" from a Hugging Face cache (refs/main)") || !strings.Contains(log, rev("llm2")) {
		t.Errorf("log does not name the hub revisions:\n%s", log)
	}
	var shown struct {
		Manifest struct {
			Meta map[string]string `json:"meta"`
		} `json:"manifest"`
	}
	c.json(&shown, "show", "tiny/gguf:"+rev("g2"))
	if m := shown.Manifest.Meta; m["hf.repo"] != "tiny/gguf" || m["hf.revision"] != rev("g2") {
		t.Errorf("show records %v", m)
	}
	if text := c.ok("show", "acme/llm"); !strings.Contains(text, "hf.revision = "+rev("llm1")) || !strings.Contains(text, "hf.refs = main") {
		t.Errorf("show does not say the revision:\n%s", text)
	}

	out := filepath.Join(t.TempDir(), "hub-out")
	for ref, snap := range snaps {
		dest := filepath.Join(t.TempDir(), "plain")
		c.ok("checkout", ref, dest)
		requireSameTree(t, snap, dest)
		c.ok("checkout", "--layout", "hf-cache", ref, out)
		repo, revision, _ := strings.Cut(ref, ":")
		requireSameTree(t, snap, filepath.Join(out, "models--"+strings.ReplaceAll(repo, "/", "--"), "snapshots", revision))
	}
	// Only the plain checkouts are recorded (for a later --force); the
	// layout's temporary ones leave no record and no folder behind.
	if recs := listFiles(t, filepath.Join(c.store, "checkouts")); len(recs) != len(snaps) {
		t.Errorf("%d checkout records after %d plain checkouts: %v", len(recs), len(snaps), recs)
	}
	if hidden, _ := filepath.Glob(filepath.Join(out, ".mstore-*")); len(hidden) != 0 {
		t.Errorf("left behind: %v", hidden)
	}
	if b, err := os.ReadFile(filepath.Join(out, "models--acme--llm", "refs", "main")); err != nil || string(b) != rev("llm1") {
		t.Errorf("refs/main of the written cache: %q, %v", b, err)
	}
	again := newCLI(t)
	var back layoutSummary
	again.json(&back, "add", out)
	if fmt.Sprint(back.versions()) != fmt.Sprint(got) {
		t.Errorf("the written cache reads back as\n%v\nwant\n%v", back.versions(), got)
	}

	// The hostile ones: refused, with the class, beside a good repo that
	// is added.
	bad := filepath.Join(t.TempDir(), "hub")
	hubSnapshot(t, bad, "models--acme--good", rev("ok"), base)
	leak := hubSnapshot(t, bad, "models--acme--leak", rev("leak"), map[string][]byte{"config.json": []byte("{}")})
	secret := writeFile(t, filepath.Join(t.TempDir(), "secret"), []byte("secret"))
	if err := os.Symlink(secret, filepath.Join(leak, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	hubSnapshot(t, bad, "models--acme--linked", rev("linked"), base)
	blobs := filepath.Join(bad, "models--acme--linked", "blobs")
	moved := filepath.Join(t.TempDir(), "blobs")
	if err := os.Rename(blobs, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, blobs); err != nil {
		t.Fatal(err)
	}
	h := newCLI(t)
	msg := h.fail("path_traversal", "add", bad)
	if !strings.Contains(msg, "2 of 3 models") {
		t.Errorf("the error does not say how many were refused: %s", msg)
	}
	if ls := h.ok("ls"); !strings.Contains(ls, "acme/good") || strings.Contains(ls, "acme/leak") || strings.Contains(ls, "acme/linked") {
		t.Errorf("after the refused add, ls:\n%s", ls)
	}
	h.fail("path_traversal", "add", leak)
}

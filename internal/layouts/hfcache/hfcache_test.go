package hfcache

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/layouts/layout"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/testenv"
)

func write(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// restored makes a checkout-like folder of files for Write.
func restored(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "model")
	for p, b := range files {
		write(t, filepath.Join(dir, filepath.FromSlash(p)), b)
	}
	return dir
}

// loadFromCache finds filename of repo at revision (a commit or a ref) the
// way huggingface_hub's try_to_load_from_cache does: the ref file under
// refs/ names the commit, snapshots/COMMIT/FILENAME must exist (its link
// resolving). No Python with huggingface_hub is packaged for Debian 12, so
// its lookup is mirrored here.
func loadFromCache(t *testing.T, cache, repo, filename, revision string) string {
	t.Helper()
	repoDir := filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
	if b, err := os.ReadFile(filepath.Join(repoDir, "refs", revision)); err == nil {
		revision = string(b)
	}
	p := filepath.Join(repoDir, "snapshots", revision, filename)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("huggingface_hub would not find %s of %s@%s: %v", filename, repo, revision, err)
	}
	return p
}

// TestWriteIsTheHubsLayout: Write names each blob as the hub does (LFS
// files by SHA-256, others by git blob id, as `git hash-object` computes
// it), links the snapshot's files relatively into blobs/, and writes
// refs/main; a second revision shares the blobs it has in common.
func TestWriteIsTheHubsLayout(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		testenv.Missing(t, "git (for git hash-object) is not installed")
	}
	weights := []byte(strings.Repeat("w", 5000))
	cfg := []byte(`{"hidden_size": 8}` + "\n")
	files := map[string][]byte{"model.safetensors": weights, "config.json": cfg, "sub/tokenizer.json": []byte("{}")}
	hub := t.TempDir()
	m := layout.Model{Dir: restored(t, files), Name: "acme/llm", Manifest: &objects.Manifest{}}
	m.Digest = objects.Sum([]byte("v1"))
	w, err := Layout.Write(m, hub, layout.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rev := m.Digest.String()[:40]
	if w.Files != 3 || w.NewBlobs != 3 || w.Path != filepath.Join(hub, "models--acme--llm", "snapshots", rev) {
		t.Fatalf("written %+v", w)
	}
	for p, b := range files {
		got := loadFromCache(t, hub, "acme/llm", p, "main")
		if data, err := os.ReadFile(got); err != nil || string(data) != string(b) {
			t.Fatalf("%s reads %q, %v", p, data, err)
		}
		link, err := os.Readlink(got)
		if err != nil || filepath.IsAbs(link) {
			t.Fatalf("%s: link %q (%v), want a relative one", p, link, err)
		}
		var want string
		if IsLFS(p, int64(len(b))) {
			sum := sha256.Sum256(b)
			want = hex.EncodeToString(sum[:])
		} else {
			out, err := exec.Command(git, "hash-object", got).Output()
			if err != nil {
				t.Fatal(err)
			}
			want = strings.TrimSpace(string(out))
		}
		if filepath.Base(link) != want {
			t.Errorf("%s is blob %s, the hub names it %s", p, filepath.Base(link), want)
		}
	}
	// A second revision: only its new file is a new blob.
	files["model.safetensors"] = []byte(strings.Repeat("v", 5000))
	m2 := layout.Model{Dir: restored(t, files), Name: "acme/llm", Digest: objects.Sum([]byte("v2")),
		Manifest: &objects.Manifest{Meta: map[string]string{MetaRepo: "acme/llm", MetaRevision: "r2"}}}
	w, err = Layout.Write(m2, hub, layout.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w.NewBlobs != 1 {
		t.Errorf("second revision wrote %d new blobs, want 1", w.NewBlobs)
	}
	loadFromCache(t, hub, "acme/llm", "config.json", "r2")
	if b, _ := os.ReadFile(filepath.Join(hub, "models--acme--llm", "refs", "main")); string(b) != rev {
		t.Errorf("refs/main = %q: a revision recorded without refs must not move it", b)
	}
	// The same revision again is a conflict, and nothing changes.
	if _, err := Layout.Write(m2, hub, layout.WriteOptions{}); errs.ClassOf(err) != errs.Conflict {
		t.Errorf("writing a revision that is there: %v, want conflict", err)
	}
	// A recorded refs/main that names another revision moves only with Force.
	m3 := m2
	m3.Dir = restored(t, files)
	m3.Manifest = &objects.Manifest{Meta: map[string]string{MetaRepo: "acme/llm", MetaRevision: "r3", MetaRefs: "main"}}
	if _, err := Layout.Write(m3, hub, layout.WriteOptions{}); errs.ClassOf(err) != errs.Conflict {
		t.Errorf("moving refs/main without force: %v, want conflict", err)
	}
	if _, err := Layout.Write(m3, hub, layout.WriteOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	loadFromCache(t, hub, "acme/llm", "config.json", "main")
}

// TestWriteRefusesABlobThatLies: a blob already in the cache under the
// name of a file's hash but holding other bytes is integrity_error.
func TestWriteRefusesABlobThatLies(t *testing.T) {
	hub := t.TempDir()
	b := []byte(strings.Repeat("w", 100))
	sum := sha256.Sum256(b)
	write(t, filepath.Join(hub, "models--acme--llm", "blobs", hex.EncodeToString(sum[:])), []byte("other"))
	m := layout.Model{Dir: restored(t, map[string][]byte{"model.safetensors": b}), Name: "acme/llm", Manifest: &objects.Manifest{}}
	if _, err := Layout.Write(m, hub, layout.WriteOptions{}); errs.ClassOf(err) != errs.IntegrityError {
		t.Fatalf("Write over a lying blob: %v, want integrity_error", err)
	}
}

func TestIsLFS(t *testing.T) {
	for p, want := range map[string]bool{"model.safetensors": true, "a/pytorch_model.bin": true, "model.GGUF": true,
		"onnx/model.onnx": true, "config.json": false, "tokenizer.json": false, "README.md": false, "x.tar.gz": true} {
		if got := IsLFS(p, 100); got != want {
			t.Errorf("IsLFS(%s) = %v, want %v", p, got, want)
		}
	}
	if !IsLFS("tokenizer.json", lfsThreshold) {
		t.Error("a file of 10 MiB is LFS")
	}
}

// TestSources: a hub's repos and revisions, the one main names last; the
// revision, refs and repo recorded; refs/ that is a link or holds a huge
// file refused.
func TestSources(t *testing.T) {
	hub := t.TempDir()
	snap := func(repo, rev string) {
		write(t, filepath.Join(hub, repo, "blobs", rev), []byte(rev))
		if err := os.MkdirAll(filepath.Join(hub, repo, "snapshots", rev), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../../blobs/"+rev, filepath.Join(hub, repo, "snapshots", rev, "config.json")); err != nil {
			t.Fatal(err)
		}
	}
	snap("models--acme--llm", "aaa")
	snap("models--acme--llm", "bbb")
	snap("models--gpt2", "ccc")
	write(t, filepath.Join(hub, "models--acme--llm", "refs", "main"), []byte("aaa"))
	write(t, filepath.Join(hub, "models--acme--llm", "refs", "pr", "1"), []byte("aaa\n"))
	if err := os.MkdirAll(filepath.Join(hub, "datasets--acme--data", "snapshots"), 0o755); err != nil {
		t.Fatal(err)
	}
	if !Layout.Detect(hub) || !Layout.Detect(filepath.Join(hub, "models--acme--llm", "snapshots", "aaa")) || Layout.Detect(t.TempDir()) {
		t.Fatal("Detect takes a hub and a snapshot, not an empty folder")
	}
	srcs, err := Layout.Sources(hub)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range srcs {
		got = append(got, s.Name+":"+s.Tag+" "+s.Meta[MetaRefs])
	}
	if want := "acme/llm:bbb |acme/llm:aaa main,pr/1|gpt2:ccc "; strings.Join(got, "|") != want {
		t.Fatalf("sources %q, want %q", strings.Join(got, "|"), want)
	}
	one, err := Layout.Sources(filepath.Join(hub, "models--acme--llm", "snapshots", "bbb"))
	if err != nil || len(one) != 1 || one[0].Meta[MetaRevision] != "bbb" || one[0].Meta[MetaRepo] != "acme/llm" {
		t.Fatalf("one snapshot: %+v, %v", one, err)
	}

	// A repo that cannot be read is refused, with its class, beside the
	// others.
	refused := func(class errs.Class) {
		t.Helper()
		srcs, err := Layout.Sources(hub)
		if err != nil || len(srcs) != 2 || errs.ClassOf(srcs[0].Err) != class || srcs[0].Name != "acme/llm" || srcs[1].Err != nil {
			t.Errorf("sources %+v, %v; want acme/llm refused with %v and gpt2 read", srcs, err, class)
		}
		if _, err := Layout.Sources(filepath.Join(hub, "models--acme--llm")); errs.ClassOf(err) != class {
			t.Errorf("the repo alone: %v, want %v", err, class)
		}
	}
	write(t, filepath.Join(hub, "models--acme--llm", "refs", "huge"), []byte(strings.Repeat("a", 1000)))
	refused(errs.SizeLimitExceeded)
	os.RemoveAll(filepath.Join(hub, "models--acme--llm", "refs"))
	if err := os.Symlink(t.TempDir(), filepath.Join(hub, "models--acme--llm", "refs")); err != nil {
		t.Fatal(err)
	}
	refused(errs.PathTraversal)
}

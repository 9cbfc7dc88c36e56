package e2e

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/testenv"
)

// hubVersion is the @huggingface/hub release .ci/run installs into .ci/hfhub.
const hubVersion = "2.17.5"

// hubScan is what e2e/testdata/hf_cache_scan.mjs prints.
type hubScan struct {
	Repos []struct {
		Type, Name string
		Size       int64
		Files      int
		Revisions  []struct {
			Commit string
			Refs   []string
			Size   int64
			Files  []struct {
				Name, Blob, Resolved string
				Size                 int64
			}
		}
	}
	Extras   []hubFile
	Warnings []string
}

// hubFile is a file of a revision for hf_cache_scan.mjs to resolve beside
// those scanCacheDir lists, and where it resolved.
type hubFile struct {
	Repo     string `json:"repo"`
	Revision string `json:"revision"`
	Path     string `json:"path"`
	Resolved string `json:"resolved,omitempty"`
}

// scanHub runs @huggingface/hub's scanCacheDir, and its offline
// downloadFileToCacheDir on every file it lists and on extras, over the
// cache folder hub.
func scanHub(t *testing.T, hub string, extras ...hubFile) hubScan {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(root, ".ci", "hfhub", "node_modules", "@huggingface", "hub")
	if b, err := os.ReadFile(filepath.Join(pkg, "package.json")); err != nil || !bytes.Contains(b, []byte(`"version": "`+hubVersion+`"`)) {
		testenv.Missing(t, "@huggingface/hub@%s is not in %s (.ci/run installs it: npm install --prefix .ci/hfhub --ignore-scripts @huggingface/hub@%s)", hubVersion, pkg, hubVersion)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node is not installed: the @huggingface/hub check is skipped")
	}
	if extras == nil {
		extras = []hubFile{}
	}
	x, _ := json.Marshal(extras)
	cmd := exec.Command(node, filepath.Join(root, "e2e", "testdata", "hf_cache_scan.mjs"), pkg, hub, string(x))
	cmd.Env = append(os.Environ(), "HF_HUB_OFFLINE=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("@huggingface/hub fails on %s: %v\n%s", hub, err, stderr.String())
	}
	var s hubScan
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("hf_cache_scan.mjs printed %q: %v", out, err)
	}
	if len(s.Warnings) != 0 {
		t.Errorf("scanCacheDir warns about %s: %v", hub, s.Warnings)
	}
	return s
}

// hubBlobName is the name the hub gives a file's blob: the SHA-256 of an
// LFS file, the git blob id of any other.
func hubBlobName(b []byte, lfs bool) string {
	if lfs {
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:])
	}
	h := sha1.New()
	h.Write([]byte("blob " + strconv.Itoa(len(b)) + "\x00"))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// TestHFCacheInHuggingFaceHub: two versions checked out --layout hf-cache
// into one hub folder (one added from a hub snapshot with its revision
// and refs/main, one added as a plain folder) are what Hugging Face's own
// @huggingface/hub finds there: scanCacheDir lists each repo ORG/NAME
// with its revision, refs main, each file with its size and a blob named
// as the hub names it (SHA-256 of the LFS weights, git blob id of the
// rest) that hashes to its name; downloadFileToCacheDir, with a fetch that
// fails, resolves every file (one two folders down too) from the cache
// alone to the original bytes.
func TestHFCacheInHuggingFaceHub(t *testing.T) {
	t.Parallel()
	files := map[string][]byte{
		"model.safetensors":     safetensorsFile(smallModel(43), nil),
		"config.json":           configJSON("float32"),
		"tokenizer.json":        tokenizerJSON(),
		"tokenizer_config.json": []byte(`{"model_max_length": 128, "tokenizer_class": "PreTrainedTokenizerFast"}` + "\n"),
		"README.md":             []byte("# tiny\n"),
	}
	lfs := map[string]bool{"model.safetensors": true}
	// A file in a subfolder, which scanCacheDir does not list (2.17 reads
	// only a snapshot's top folder) and downloadFileToCacheDir resolves.
	nested := map[string][]byte{"onnx/extra/notes.txt": []byte("two folders down\n")}
	all := map[string][]byte{}
	for _, m := range []map[string][]byte{files, nested} {
		for p, b := range m {
			all[p] = b
		}
	}
	src := t.TempDir()
	writeFiles(t, src, all)
	srcHub := filepath.Join(t.TempDir(), "hub")
	hubSnapshot(t, srcHub, "models--acme--llm", rev("hub1"), all)
	writeFile(t, filepath.Join(srcHub, "models--acme--llm", "refs", "main"), []byte(rev("hub1")))

	c := newCLI(t)
	plain := c.add(src, "--name", "acme/plain")
	var sum layoutSummary
	c.json(&sum, "add", srcHub)
	out := filepath.Join(t.TempDir(), "hub")
	c.ok("checkout", "--layout", "hf-cache", "acme/llm", out)
	c.ok("checkout", "--layout", "hf-cache", "acme/plain", out)

	// A version with no hub revision gets one made of its digest.
	want := map[string]string{"acme/llm": rev("hub1"), "acme/plain": plain.Digest[:40]}
	var extras []hubFile
	for repo, revision := range want {
		for p := range nested {
			extras = append(extras, hubFile{Repo: repo, Revision: revision, Path: p})
		}
	}
	scan := scanHub(t, out, extras...)
	if len(scan.Extras) != len(extras) {
		t.Fatalf("resolved %d of %d files in subfolders", len(scan.Extras), len(extras))
	}
	for _, e := range scan.Extras {
		if got, err := os.ReadFile(e.Resolved); err != nil || !bytes.Equal(got, nested[e.Path]) {
			t.Errorf("%s: downloadFileToCacheDir resolves %s offline to %s (%v), not to its bytes", e.Repo, e.Path, e.Resolved, err)
		}
	}
	if len(scan.Repos) != len(want) {
		t.Fatalf("scanCacheDir finds %d repos in %s, want %d: %+v", len(scan.Repos), out, len(want), scan)
	}
	for _, r := range scan.Repos {
		if r.Type != "model" || want[r.Name] == "" || len(r.Revisions) != 1 {
			t.Fatalf("scanCacheDir finds %s %s with %d revisions", r.Type, r.Name, len(r.Revisions))
		}
		rv := r.Revisions[0]
		if rv.Commit != want[r.Name] || fmt.Sprint(rv.Refs) != "[main]" {
			t.Errorf("%s: revision %s with refs %v, want %s with [main]", r.Name, rv.Commit, rv.Refs, want[r.Name])
		}
		var total int64
		var names []string
		for _, f := range rv.Files {
			names = append(names, f.Name)
			orig, ok := files[f.Name]
			if !ok || f.Size != int64(len(orig)) {
				t.Errorf("%s: %s of %d bytes is not a file of the model", r.Name, f.Name, f.Size)
				continue
			}
			total += f.Size
			blobs := filepath.Join(out, "models--"+strings.ReplaceAll(r.Name, "/", "--"), "blobs")
			blob, err := os.ReadFile(f.Blob)
			if err != nil || filepath.Dir(f.Blob) != blobs || filepath.Base(f.Blob) != hubBlobName(orig, lfs[f.Name]) || hubBlobName(blob, lfs[f.Name]) != filepath.Base(f.Blob) {
				t.Errorf("%s: %s resolves to blob %s (%v), want %s/%s holding its bytes", r.Name, f.Name, f.Blob, err, blobs, hubBlobName(orig, lfs[f.Name]))
			}
			got, err := os.ReadFile(f.Resolved)
			if err != nil || !bytes.Equal(got, orig) {
				t.Errorf("%s: downloadFileToCacheDir resolves %s offline to %s (%v), not to its bytes", r.Name, f.Name, f.Resolved, err)
			}
		}
		sort.Strings(names)
		if fmt.Sprint(names) != fmt.Sprint(sortedKeys(files)) || rv.Size != total || r.Size != total || r.Files != len(files) {
			t.Errorf("%s: scanCacheDir lists %v (%d bytes; repo %d bytes in %d blobs), want %v (%d bytes)", r.Name, names, rv.Size, r.Size, r.Files, sortedKeys(files), total)
		}
	}
}

// TestHuggingFaceHubReadsTheTestCaches: the synthetic hub the tests build
// (hubSnapshot: two repos, revisions sharing blobs, refs/main on the older
// one, another ref on the other repo) is what @huggingface/hub describes, and mstore's add of it agrees
// with that description: one version per revision the library lists,
// tagged with its commit and recording the repo, revision and refs the library
// gives it, the ref at the revision its refs/main names, and
// each version holding the files the library lists with their sizes.
func TestHuggingFaceHubReadsTheTestCaches(t *testing.T) {
	t.Parallel()
	hub := filepath.Join(t.TempDir(), "hub")
	base := map[string][]byte{"model.safetensors": safetensorsFile(smallModel(44), nil), "config.json": configJSON("float16"), "tokenizer.json": tokenizerJSON()}
	next := map[string][]byte{"model.safetensors": base["model.safetensors"], "config.json": configJSON("bfloat16"), "tokenizer.json": base["tokenizer.json"], "README.md": []byte("# v2\n")}
	hubSnapshot(t, hub, "models--acme--llm", rev("r1"), base)
	hubSnapshot(t, hub, "models--acme--llm", rev("r2"), next)
	hubSnapshot(t, hub, "models--tiny--st", rev("t1"), map[string][]byte{"model.safetensors": safetensorsFile(smallModel(45), nil)})
	writeFile(t, filepath.Join(hub, "models--acme--llm", "refs", "main"), []byte(rev("r1")))
	// scanCacheDir of @huggingface/hub 2.17 gives up on a repo without a
	// refs/ folder (huggingface_hub's scan_cache_dir does not): give it one.
	writeFile(t, filepath.Join(hub, "models--tiny--st", "refs", "v1"), []byte(rev("t1")))

	scan := scanHub(t, hub)
	c := newCLI(t)
	var sum layoutSummary
	c.json(&sum, "add", hub)
	got := sum.versions()
	listed := 0
	for _, r := range scan.Repos {
		for _, rv := range r.Revisions {
			listed++
			ref := r.Name + ":" + rv.Commit
			if got[ref] == "" {
				t.Errorf("the library lists %s, mstore added %v", ref, got)
				continue
			}
			lib := map[string]int64{}
			for _, f := range rv.Files {
				lib[f.Name] = f.Size
			}
			var shown struct {
				Manifest struct {
					Meta  map[string]string `json:"meta"`
					Files []struct {
						Path string `json:"path"`
						Size int64  `json:"size"`
					} `json:"files"`
				} `json:"manifest"`
			}
			c.json(&shown, "show", ref)
			stored := map[string]int64{}
			for _, f := range shown.Manifest.Files {
				stored[f.Path] = f.Size
			}
			if m := shown.Manifest.Meta; m["hf.repo"] != r.Name || m["hf.revision"] != rv.Commit || m["hf.refs"] != strings.Join(rv.Refs, ",") {
				t.Errorf("%s records %v; the library lists refs %v", ref, m, rv.Refs)
			}
			if fmt.Sprint(stored) != fmt.Sprint(lib) {
				t.Errorf("%s: mstore stored %v, the library lists %v", ref, stored, lib)
			}
			if atMain := fmt.Sprint(rv.Refs) == "[main]"; atMain != (rv.Commit == rev("r1")) {
				t.Errorf("the library gives %s the refs %v; refs/main names %s", ref, rv.Refs, rev("r1"))
			} else if atMain && c.show(r.Name).Digest != got[ref] {
				t.Errorf("refs/main names %s, but %s is at %s", rv.Commit, r.Name, c.show(r.Name).Digest)
			}
		}
	}
	if listed != 3 || len(got) != listed {
		t.Errorf("the library lists %d revisions, mstore added %d: %v", listed, len(got), got)
	}
}

func sortedKeys(m map[string][]byte) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

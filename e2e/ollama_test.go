package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type ollamaLayer struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

// ollamaBlob writes b into the models folder as ollama does and returns
// its layer.
func ollamaBlob(t *testing.T, models, mediaType string, b []byte) ollamaLayer {
	t.Helper()
	sum := sha256.Sum256(b)
	h := hex.EncodeToString(sum[:])
	writeFile(t, filepath.Join(models, "blobs", "sha256-"+h), b)
	return ollamaLayer{mediaType, "sha256:" + h, int64(len(b))}
}

// ollamaModel writes a synthetic models folder holding MODEL:TAG of
// library: the real GGUF file as its model layer, a template, params,
// a system prompt, two licenses and the config, and returns the
// manifest's path.
func ollamaModel(t *testing.T, models, model, tag string, gguf []byte, system string) string {
	t.Helper()
	img := "application/vnd.ollama.image."
	m := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.docker.distribution.manifest.v2+json",
		"config": ollamaBlob(t, models, "application/vnd.docker.container.image.v1+json",
			[]byte(`{"model_format":"gguf","model_family":"llama","model_families":["llama"],"model_type":"1M","file_type":"F32","architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}`)),
		"layers": []ollamaLayer{
			ollamaBlob(t, models, img+"model", gguf),
			ollamaBlob(t, models, img+"template", []byte("{{ .System }} {{ .Prompt }}")),
			ollamaBlob(t, models, img+"params", []byte(`{"stop":["</s>"]}`)),
			ollamaBlob(t, models, img+"system", []byte(system)),
			ollamaBlob(t, models, img+"license", []byte("MIT License")),
			ollamaBlob(t, models, img+"license", []byte("Llama 2 Community License")),
		},
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, filepath.Join(models, "manifests", "registry.ollama.ai", "library", model, tag), append(b, '\n'))
}

// TestOllama: a synthetic models folder is added (the GGUF layer per
// tensor, the other layers as files), checked out byte-identical, written
// back in ollama's layout with the same manifest and blobs, and added
// again to the same digest; a layer whose blob does not hash to its
// digest is integrity_error.
func TestOllama(t *testing.T) {
	t.Parallel()
	gguf, err := os.ReadFile(filepath.Join(sharedTestdata(t, "gguf"), "llama-2-tiny-random.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	models := filepath.Join(t.TempDir(), "models")
	manifest := ollamaModel(t, models, "tiny", "1m", gguf, "Be brief.")
	c := newCLI(t)
	res := c.add(manifest)
	if res.Name != "tiny" || res.Tag != "1m" || res.Format != "gguf" || res.Tensors == 0 || res.Files != 7 {
		t.Fatalf("add of the manifest: %+v", res)
	}
	plain := filepath.Join(t.TempDir(), "plain")
	c.ok("checkout", "tiny:1m", plain)
	requireSameFile(t, filepath.Join(sharedTestdata(t, "gguf"), "llama-2-tiny-random.gguf"), filepath.Join(plain, "model.gguf"))
	if got := listFiles(t, plain); !equalStrings(got, []string{"config.json", "license", "license-2", "model.gguf", "params", "system", "template"}) {
		t.Fatalf("checkout holds %v", got)
	}

	out := filepath.Join(t.TempDir(), "ollama")
	c.ok("checkout", "--layout", "ollama", "tiny:1m", out)
	requireSameTree(t, models, out)

	again := newCLI(t)
	if back := again.add(out); back.Name != "tiny" || back.Tag != "1m" || back.Digest != res.Digest { // the whole models folder, of one model
		t.Fatalf("the written models folder reads back as %+v, want tiny:1m %s", back, res.Digest)
	}

	// One model of a models folder, by the name it is added as.
	if r := newCLI(t).add(models, "--only", "tiny:1m"); r.Digest != res.Digest {
		t.Errorf("add --only tiny:1m: %s, want %s", r.Digest, res.Digest)
	}
	newCLI(t).fail("not_found", "add", models, "--only", "tiny:2m")

	// A plain GGUF becomes an ollama model named after its ref.
	c.ok("add", filepath.Join(sharedTestdata(t, "gguf"), "llama-2-tiny-random.gguf"), "--name", "acme/tiny", "--tag", "q")
	c.ok("checkout", "--layout", "ollama", "acme/tiny:q", out)
	other := filepath.Join(out, "manifests", "registry.ollama.ai", "acme", "tiny", "q")
	if d := again.add(other).Digest; d == "" {
		t.Fatal("the written manifest of a plain GGUF does not add")
	}

	// A SafeTensors model converted on the way (--format gguf).
	st := filepath.Join(t.TempDir(), "st")
	writeFiles(t, st, map[string][]byte{"model.safetensors": safetensorsFile(smallModel(52), nil), "config.json": configJSON("float32")})
	c.add(st, "--name", "acme/st")
	c.ok("checkout", "--layout", "ollama", "--format", "gguf", "acme/st", out)
	if r := again.add(filepath.Join(out, "manifests", "registry.ollama.ai", "acme", "st", "latest")); r.Tensors != len(smallModel(52)) || r.Format != "gguf" {
		t.Errorf("the converted model reads back as %+v", r)
	}

	// One flipped byte in a layer's blob: that model is refused, the
	// other of its folder added.
	ollamaModel(t, models, "other", "x", gguf, "Be kind.")
	blob := filepath.Join(models, "blobs", "sha256-"+hex.EncodeToString(func() []byte { s := sha256.Sum256([]byte("Be brief.")); return s[:] }()))
	if err := os.WriteFile(blob, []byte("Be brief!"), 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := newCLI(t)
	fresh.fail("integrity_error", "add", manifest)
	fresh.fail("integrity_error", "add", models)
	if ls := fresh.ok("ls"); !strings.Contains(ls, "other") || strings.Contains(ls, "tiny") {
		t.Errorf("after the refused add, ls:\n%s", ls)
	}
}

package ollama

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/layouts/layout"
	"github.com/mstore/mstore/internal/objects"
)

// store is a synthetic models folder.
type store struct {
	t      *testing.T
	models string
}

func newStore(t *testing.T) *store { return &store{t, t.TempDir()} }

// blob writes b as a blob and returns its layer.
func (s *store) blob(mediaType string, b []byte) layer {
	s.t.Helper()
	sum := sha256.Sum256(b)
	l := layer{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(b))}
	p := filepath.Join(s.models, filepath.FromSlash(blobPath(l.Digest)))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		s.t.Fatal(err)
	}
	return l
}

// manifest writes a manifest of the config and layers under n.
func (s *store) manifest(n Name, m *manifest) string {
	s.t.Helper()
	p := filepath.Join(s.models, filepath.FromSlash(n.path()))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(p, encode(m), 0o644); err != nil {
		s.t.Fatal(err)
	}
	return p
}

func (s *store) path(l layer) string {
	return filepath.Join(s.models, filepath.FromSlash(blobPath(l.Digest)))
}

func (s *store) model(n Name) (string, *manifest) {
	m := &manifest{SchemaVersion: 2, MediaType: manifestMediaType,
		Config: s.blob(configMediaType, []byte(`{"model_format":"gguf"}`)),
		Layers: []layer{s.blob(modelMediaType, []byte("GGUF-bytes")), s.blob(layerPrefix+"template", []byte("{{ .Prompt }}")),
			s.blob(layerPrefix+"license", []byte("MIT")), s.blob(layerPrefix+"license", []byte("Apache"))}}
	return s.manifest(n, m), m
}

var tiny = Name{DefaultHost, DefaultNamespace, "tiny", "1b"}

// TestSourcesVerifyEveryBlob: every layer's and the config's blob must
// be a regular file of the manifest's size and sha256.
func TestSourcesVerifyEveryBlob(t *testing.T) {
	s := newStore(t)
	p, m := s.model(tiny)
	if !Layout.Detect(p) || !Layout.Detect(s.models) || Layout.Detect(t.TempDir()) {
		t.Fatal("Detect takes a manifest file and a models folder only")
	}
	srcs, err := Layout.Sources(p)
	if err != nil {
		t.Fatal(err)
	}
	src := srcs[0]
	want := map[string]string{"config.json": blobPath(m.Config.Digest), "model.gguf": blobPath(m.Layers[0].Digest),
		"template": blobPath(m.Layers[1].Digest), "license": blobPath(m.Layers[2].Digest), "license-2": blobPath(m.Layers[3].Digest)}
	if src.Name != "tiny" || src.Tag != "1b" || fmt.Sprint(src.Files) != fmt.Sprint(want) || src.Meta[MetaName] != tiny.String() {
		t.Fatalf("source %+v", src)
	}
	for name, c := range map[string]struct {
		damage func(s *store, m *manifest)
		class  errs.Class
	}{
		"flipped byte": {func(s *store, m *manifest) { os.WriteFile(s.path(m.Layers[1]), []byte("{{ .Prompt }!"), 0o644) }, errs.IntegrityError},
		"short":        {func(s *store, m *manifest) { os.WriteFile(s.path(m.Layers[0]), []byte("GGUF"), 0o644) }, errs.IntegrityError},
		"config":       {func(s *store, m *manifest) { os.WriteFile(s.path(m.Config), []byte(`{"model_format":"xxxx"}`), 0o644) }, errs.IntegrityError},
		"missing":      {func(s *store, m *manifest) { os.Remove(s.path(m.Layers[2])) }, errs.NotFound},
		"a link": {func(s *store, m *manifest) {
			os.Remove(s.path(m.Layers[2]))
			os.Symlink("/etc/hostname", s.path(m.Layers[2]))
		}, errs.PathTraversal},
		"blobs a link": {func(s *store, m *manifest) {
			os.Rename(filepath.Join(s.models, "blobs"), filepath.Join(s.models, "elsewhere"))
			os.Symlink("elsewhere", filepath.Join(s.models, "blobs"))
		}, errs.PathTraversal},
	} {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			p, m := s.model(tiny)
			c.damage(s, m)
			if _, err := Layout.Sources(p); errs.ClassOf(err) != c.class {
				t.Fatalf("Sources: %v, want %v", err, c.class)
			}
		})
	}
}

// TestManifestSchema: what ollama writes is read; other schemas, media
// types, digests and sizes are refused with their class.
func TestManifestSchema(t *testing.T) {
	good := func() *manifest {
		d := "sha256:" + strings.Repeat("ab", 32)
		return &manifest{SchemaVersion: 2, MediaType: manifestMediaType, Config: layer{configMediaType, d, 2, ""},
			Layers: []layer{{modelMediaType, d, 10, ""}, {layerPrefix + "params", d, 3, "library/x"}}}
	}
	if _, err := parseManifest(encode(good()), "m"); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		mutate func(m *manifest)
		class  errs.Class
	}{
		"schema 1":        {func(m *manifest) { m.SchemaVersion = 1 }, errs.UnsupportedVersion},
		"oci media type":  {func(m *manifest) { m.MediaType = "application/vnd.oci.image.manifest.v1+json" }, errs.UnsupportedVersion},
		"config type":     {func(m *manifest) { m.Config.MediaType = "text/plain" }, errs.UnsupportedVersion},
		"md5 digest":      {func(m *manifest) { m.Layers[0].Digest = "md5:00" }, errs.SchemaError},
		"upper-case hex":  {func(m *manifest) { m.Layers[1].Digest = strings.ToUpper(m.Layers[1].Digest) }, errs.SchemaError},
		"negative size":   {func(m *manifest) { m.Layers[1].Size = -1 }, errs.SchemaError},
		"no model layer":  {func(m *manifest) { m.Layers = m.Layers[1:] }, errs.UnsupportedVersion},
		"two model layer": {func(m *manifest) { m.Layers = append(m.Layers, m.Layers[0]) }, errs.UnsupportedVersion},
	} {
		m := good()
		c.mutate(m)
		if _, err := parseManifest(encode(m), "m"); errs.ClassOf(err) != c.class {
			t.Errorf("%s: %v, want %v", name, err, c.class)
		}
	}
	if _, err := parseManifest([]byte("{"), "m"); errs.ClassOf(err) != errs.SchemaError {
		t.Errorf("truncated JSON: %v, want schema_error", err)
	}
	if _, err := parseManifest(make([]byte, maxManifest+1), "m"); errs.ClassOf(err) != errs.SizeLimitExceeded {
		t.Errorf("huge manifest: %v, want size_limit_exceeded", err)
	}
	m := good()
	m.Layers[1].MediaType = layerPrefix + "../x"
	if _, err := fileNames(m, "m"); errs.ClassOf(err) != errs.UnsupportedVersion {
		t.Errorf("a media type that is no file name: %v", err)
	}
}

// TestNames: ref names and ollama names map both ways.
func TestNames(t *testing.T) {
	for _, n := range []Name{tiny, {DefaultHost, "acme", "llm", "q4"}, {"example.com", "acme", "llm", "latest"}} {
		back, ok := nameOfRef(n.ref(), n.Tag)
		if !ok || back != n {
			t.Errorf("%v → %s → %v", n, n.ref(), back)
		}
		if p, ok := parseName(n.String()); !ok || p != n {
			t.Errorf("parseName(%s) = %v", n, p)
		}
	}
	for _, bad := range []string{"a/b:c", "a/b/../d:x", "h/n/m", "h/n.s/m:t", "h/n/m:t\\x", "h/n/m:" + strings.Repeat("t", 129), "h/n/.:t"} {
		if _, ok := parseName(bad); ok {
			t.Errorf("parseName(%q) took it", bad)
		}
	}
}

// TestWriteBackIsTheSameStore: Write of the files a source read gives the
// same manifest bytes and blobs; a changed file gets a new manifest.
func TestWriteBackIsTheSameStore(t *testing.T) {
	s := newStore(t)
	p, _ := s.model(tiny)
	srcs, err := Layout.Sources(p)
	if err != nil {
		t.Fatal(err)
	}
	src := srcs[0]
	restore := func() string {
		dir := filepath.Join(t.TempDir(), "model")
		for name, real := range src.Files {
			b, err := os.ReadFile(filepath.Join(s.models, real))
			if err != nil {
				t.Fatal(err)
			}
			os.MkdirAll(dir, 0o755)
			os.WriteFile(filepath.Join(dir, name), b, 0o644)
		}
		return dir
	}
	out := t.TempDir()
	m := layout.Model{Dir: restore(), Manifest: &objects.Manifest{Meta: src.Meta}}
	w, err := Layout.Write(m, out, layout.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w.Files != 5 || w.NewBlobs != 5 {
		t.Errorf("written %+v", w)
	}
	orig, _ := os.ReadFile(p)
	got, _ := os.ReadFile(filepath.Join(out, filepath.FromSlash(tiny.path())))
	if string(got) != string(orig) {
		t.Fatalf("manifest differs:\n%s\n%s", got, orig)
	}
	if back, err := Layout.Sources(out); err != nil || fmt.Sprint(back[0].Files) != fmt.Sprint(src.Files) {
		t.Fatalf("written store reads back as %+v, %v", back, err)
	}
	// A changed model file (a checkout with --dtype) is a new manifest,
	// whose previous version on disk is replaced only with Force.
	m.Dir = restore()
	os.WriteFile(filepath.Join(m.Dir, "model.gguf"), []byte("GGUF-other"), 0o644)
	if _, err := Layout.Write(m, out, layout.WriteOptions{}); errs.ClassOf(err) != errs.Conflict {
		t.Fatalf("replacing a manifest: %v, want conflict", err)
	}
	if _, err := Layout.Write(m, out, layout.WriteOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if back, err := Layout.Sources(out); err != nil || back[0].Files["model.gguf"] == src.Files["model.gguf"] {
		t.Fatalf("the new manifest does not name the new model layer: %+v, %v", back, err)
	}
}

// TestWriteRefusesLinkedFolders: a blobs/ or manifests/ folder of the
// destination that is a link is path_traversal, and nothing is written
// through it.
func TestWriteRefusesLinkedFolders(t *testing.T) {
	for _, folder := range []string{"blobs", "manifests/registry.ollama.ai"} {
		out, elsewhere := t.TempDir(), t.TempDir()
		p := filepath.Join(out, filepath.FromSlash(folder))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.Symlink(elsewhere, p); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "model")
		os.MkdirAll(dir, 0o755)
		// The smallest whole GGUF (version 3, no tensors, no key/values):
		// Write reads its header for the config's details.
		os.WriteFile(filepath.Join(dir, "model.gguf"), append([]byte("GGUF\x03\x00\x00\x00"), make([]byte, 16)...), 0o644)
		m := layout.Model{Dir: dir, Name: "tiny", Manifest: &objects.Manifest{}}
		if _, err := Layout.Write(m, out, layout.WriteOptions{}); errs.ClassOf(err) != errs.PathTraversal {
			t.Errorf("%s a link: %v, want path_traversal", folder, err)
		}
		if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
			t.Errorf("%s a link: %d entries written through it", folder, len(entries))
		}
	}
}

// FuzzParseManifest: no input panics, and a manifest that parses names
// only blob files inside blobs/ and model files that are clean names.
func FuzzParseManifest(f *testing.F) {
	d := "sha256:" + strings.Repeat("ab", 32)
	f.Add(encode(&manifest{SchemaVersion: 2, MediaType: manifestMediaType, Config: layer{configMediaType, d, 2, ""},
		Layers: []layer{{modelMediaType, d, 10, ""}, {layerPrefix + "license", d, 3, ""}, {layerPrefix + "license", d, 3, ""}}}))
	f.Add([]byte(`{"schemaVersion":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseManifest(b, "fuzz")
		if err != nil {
			return
		}
		names, err := fileNames(m, "fuzz")
		if err != nil {
			return
		}
		for i, l := range append([]layer{m.Config}, m.Layers...) {
			if !objects.IsCleanPath(names[i]) || strings.Contains(names[i], "/") {
				t.Fatalf("model file name %q", names[i])
			}
			if p := blobPath(l.Digest); !strings.HasPrefix(p, "blobs/sha256-") || strings.Contains(p[6:], "/") {
				t.Fatalf("blob path %q", p)
			}
		}
	})
}

package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/layouts/oci/modelpack"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

func newStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "store"), true, store.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// model writes testmodel.Tiny (shards, index, config) and returns its
// directory and files.
func model(t *testing.T) (string, map[string][]byte) {
	t.Helper()
	files, err := testmodel.Tiny.Build()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := testmodel.Write(dir, files); err != nil {
		t.Fatal(err)
	}
	return dir, files
}

func add(t *testing.T, st *store.Store, dir string) (*archiver.Result, error) {
	t.Helper()
	return Add(context.Background(), st, dir, archiver.Options{Name: "tiny"})
}

func readJSON(t *testing.T, p string, v any) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// exported adds the tiny model, writes it as a layout and returns the
// store, the version and the layout's directory.
func exported(t *testing.T) (*store.Store, objects.Digest, string) {
	t.Helper()
	dir, _ := model(t)
	st := newStore(t)
	res, err := archiver.Add(context.Background(), st, dir, archiver.Options{Name: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "layout")
	if _, err := Checkout(context.Background(), st, res.Digest, out, CheckoutOptions{Name: "tiny", Tag: "v1"}); err != nil {
		t.Fatal(err)
	}
	return st, res.Digest, out
}

func artifactOf(t *testing.T, dir string) (ocispec.Manifest, string) {
	t.Helper()
	var idx ocispec.Index
	readJSON(t, filepath.Join(dir, "index.json"), &idx)
	if len(idx.Manifests) != 1 || idx.Manifests[0].Annotations[ocispec.AnnotationRefName] != "v1" {
		t.Fatalf("index.json: %+v", idx)
	}
	p := filepath.Join(dir, "blobs", "sha256", idx.Manifests[0].Digest.Encoded())
	var m ocispec.Manifest
	readJSON(t, p, &m)
	return m, p
}

// The written layout is a ModelPack artifact: one raw layer per file with
// its path, a model config, mstore's map; added again (here or in another
// store) it is the same version, and nothing new is stored here.
func TestExportReimportSameDigest(t *testing.T) {
	st, d, out := exported(t)
	m, _ := artifactOf(t, out)
	for _, p := range []string{out, filepath.Join(out, "blobs", "sha256", m.Layers[0].Digest.Encoded())} {
		if info, err := os.Stat(p); err != nil || info.Mode().Perm()&0o044 != 0o044 {
			t.Errorf("%s: %v, %v; want readable by all, as a checkout is", p, info.Mode(), err)
		}
	}
	if m.ArtifactType != modelpack.ArtifactType || m.Config.MediaType != modelpack.MediaTypeConfig {
		t.Fatalf("artifactType %q, config %q", m.ArtifactType, m.Config.MediaType)
	}
	var paths []string
	maps := 0
	for _, l := range m.Layers {
		if l.MediaType == modelpack.MediaTypeMap {
			maps++
			continue
		}
		if l.MediaType != modelpack.MediaTypeWeight && l.MediaType != modelpack.MediaTypeWeightConf {
			t.Errorf("layer %s: media type %s", l.Annotations[modelpack.AnnotationFilepath], l.MediaType)
		}
		paths = append(paths, l.Annotations[modelpack.AnnotationFilepath])
	}
	_, files := model(t)
	var want []string
	for p := range files {
		want = append(want, p)
	}
	sort.Strings(want)
	if maps != 1 || !equal(paths, want) {
		t.Fatalf("layers %v (+%d maps), want %v", paths, maps, want)
	}
	other := newStore(t)
	res, err := Add(context.Background(), other, out, archiver.Options{Name: "tiny", Tag: "v1", Message: "from the layout"})
	if err != nil || res.Digest != d || res.Tag != "v1" {
		t.Fatalf("re-import into a new store: %+v, %v; want %s", res, err, d)
	}
	other.View(func(tx *bolt.Tx) error {
		h, err := refs.History(tx, "tiny")
		if err != nil || len(h) != 1 || h[0].Message != "from the layout" {
			t.Errorf("history %+v, %v: want the add's message", h, err)
		}
		return nil
	})
	res, err = add(t, st, out)
	if err != nil || res.Digest != d || res.NewBlobs != 0 || res.NewBytes != 0 {
		t.Fatalf("re-import into the same store: %+v, %v", res, err)
	}
	if _, err := Checkout(context.Background(), st, d, out, CheckoutOptions{}); errs.ClassOf(err) != errs.Conflict {
		t.Fatalf("checkout over a layout: %v, want conflict", err)
	}
}

func equal(a, b []string) bool {
	sort.Strings(a)
	return len(a) == len(b) && (len(a) == 0 || bytes.Equal([]byte(joined(a)), []byte(joined(b))))
}

func joined(a []string) string {
	var b bytes.Buffer
	for _, s := range a {
		b.WriteString(s + "\n")
	}
	return b.String()
}

// A blob whose bytes do not hash to its name is refused, whichever blob it
// is; so is a blob that is a link.
func TestLyingDigestsAreRefused(t *testing.T) {
	_, _, out := exported(t)
	m, manPath := artifactOf(t, out)
	blob := func(d digest.Digest) string { return filepath.Join(out, "blobs", "sha256", d.Encoded()) }
	cases := map[string]string{"a file layer": blob(m.Layers[0].Digest), "the map layer": blob(m.Layers[len(m.Layers)-1].Digest),
		"the config": blob(m.Config.Digest), "the manifest": manPath}
	for what, p := range cases {
		t.Run(what, func(t *testing.T) {
			orig, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			bad := bytes.Clone(orig)
			bad[len(bad)/2] ^= 1
			os.WriteFile(p, bad, 0o644)
			defer os.WriteFile(p, orig, 0o644)
			st := newStore(t)
			if _, err := add(t, st, out); errs.ClassOf(err) != errs.IntegrityError {
				t.Fatalf("got %v, want integrity_error", err)
			}
		})
	}
	t.Run("a link", func(t *testing.T) {
		p := blob(m.Layers[0].Digest)
		moved := p + ".real"
		os.Rename(p, moved)
		os.Symlink(moved, p)
		defer os.Rename(moved, p)
		if _, err := add(t, newStore(t), out); errs.ClassOf(err) != errs.PathTraversal {
			t.Fatalf("got %v, want path_traversal", err)
		}
	})
}

// foreign writes a layout as another tool would (no map): raw layers, and
// config.json in a tar layer; edit may change the manifest.
func foreign(t *testing.T, files map[string][]byte, edit func(*ocispec.Manifest)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "kitops")
	blobs := filepath.Join(dir, "blobs", "sha256")
	os.MkdirAll(blobs, 0o755)
	put := func(b []byte) digest.Digest {
		d := digest.FromBytes(b)
		os.WriteFile(filepath.Join(blobs, d.Encoded()), b, 0o644)
		return d
	}
	cfg := []byte(`{"descriptor":{"name":"tiny"},"modelfs":{"type":"layers","diffIds":[]},"config":{}}`)
	man := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: modelpack.ArtifactType,
		Config: ocispec.Descriptor{MediaType: modelpack.MediaTypeConfig, Digest: put(cfg), Size: int64(len(cfg))}}
	man.SchemaVersion = 2
	var names []string
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		b, mt := files[p], modelpack.MediaTypeWeight
		if p == "config.json" {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			tw.WriteHeader(&tar.Header{Name: p, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg})
			tw.Write(b)
			tw.Close()
			b, mt = buf.Bytes(), "application/vnd.cncf.model.weight.config.v1.tar"
		}
		man.Layers = append(man.Layers, ocispec.Descriptor{MediaType: mt, Digest: put(b), Size: int64(len(b)),
			Annotations: map[string]string{modelpack.AnnotationFilepath: p}})
	}
	if edit != nil {
		edit(&man)
	}
	mb, _ := json.Marshal(man)
	idx := ocispec.Index{Manifests: []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: modelpack.ArtifactType, Digest: put(mb), Size: int64(len(mb))}}}
	idx.SchemaVersion = 2
	ib, _ := json.Marshal(idx)
	os.WriteFile(filepath.Join(dir, "index.json"), ib, 0o644)
	os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(layoutFile), 0o644)
	if !Detect(dir) {
		t.Fatal("Detect: not a layout")
	}
	return dir
}

// A layout written by another tool (raw and tar layers, no map) is taken
// in file by file: the same version as adding the model directory.
func TestForeignLayout(t *testing.T) {
	dir, files := model(t)
	st := newStore(t)
	want, err := archiver.Add(context.Background(), st, dir, archiver.Options{Name: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Add(context.Background(), newStore(t), foreign(t, files, nil), archiver.Options{})
	if err != nil || res.Digest != want.Digest || res.Name != "tiny" {
		t.Fatalf("foreign layout: %+v, %v; want %s named by its config", res, err, want.Digest)
	}
	hostile := map[string]func(*ocispec.Manifest){
		"../escape":   func(m *ocispec.Manifest) { m.Layers[0].Annotations[modelpack.AnnotationFilepath] = "../escape" },
		"/absolute":   func(m *ocispec.Manifest) { m.Layers[0].Annotations[modelpack.AnnotationFilepath] = "/etc/passwd" },
		"a/../../b":   func(m *ocispec.Manifest) { m.Layers[0].Annotations[modelpack.AnnotationFilepath] = "a/../../b" },
		"size lies":   func(m *ocispec.Manifest) { m.Layers[0].Size-- },
		"zstd layers": func(m *ocispec.Manifest) { m.Layers[0].MediaType = "application/vnd.cncf.model.weight.v1.tar+zstd" },
	}
	want2 := map[string]errs.Class{"../escape": errs.PathTraversal, "/absolute": errs.PathTraversal, "a/../../b": errs.PathTraversal,
		"size lies": errs.IntegrityError, "zstd layers": errs.UnsupportedVersion}
	for name, edit := range hostile {
		t.Run(name, func(t *testing.T) {
			_, err := Add(context.Background(), newStore(t), foreign(t, files, edit), archiver.Options{})
			if errs.ClassOf(err) != want2[name] {
				t.Fatalf("got %v, want %s", err, want2[name].Key())
			}
		})
	}
}

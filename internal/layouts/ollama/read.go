package ollama

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/layouts/layout"
	"github.com/mstore/mstore/internal/refs"
)

// Layout is Ollama's models folder.
var Layout layout.FileLayout = ollamaLayout{}

type ollamaLayout struct{}

func (ollamaLayout) Name() string { return "ollama" }

// Detect takes a manifest file (…/manifests/HOST/NS/MODEL/TAG) or a models
// folder (manifests/ and blobs/).
func (ollamaLayout) Detect(path string) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	if info, err := os.Lstat(abs); err == nil && info.Mode().IsRegular() {
		models, _, ok := splitManifestPath(abs)
		_, err := os.Lstat(filepath.Join(models, "blobs")) // source checks it is a folder
		return ok && err == nil
	}
	return isModels(abs)
}

func isModels(dir string) bool {
	m, err1 := os.Lstat(filepath.Join(dir, "manifests"))
	b, err2 := os.Lstat(filepath.Join(dir, "blobs"))
	return err1 == nil && err2 == nil && m.IsDir() && b.IsDir()
}

// splitManifestPath returns the models folder and the name of the manifest
// file p (MODELS/manifests/HOST/NS/MODEL/TAG).
func splitManifestPath(p string) (models string, n Name, ok bool) {
	tag, model := filepath.Base(p), filepath.Base(filepath.Dir(p))
	ns := filepath.Base(filepath.Dir(filepath.Dir(p)))
	host := filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(p))))
	manifests := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(p))))
	if filepath.Base(manifests) != "manifests" {
		return "", Name{}, false
	}
	n = Name{host, ns, model, tag}
	return filepath.Dir(manifests), n, n.valid()
}

// Sources reads the manifest at path, or every manifest of the models
// folder at path (sorted by name), checking every blob's sha256.
func (ollamaLayout) Sources(path string) ([]layout.Source, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("ollama: %w", err)
	}
	if models, n, ok := splitManifestPath(abs); ok {
		src, err := source(models, n)
		if err != nil {
			return nil, err
		}
		return []layout.Source{src}, nil
	}
	// ollama's own listing: manifests/*/*/*/* (server/manifest.go).
	found, err := filepath.Glob(filepath.Join(abs, "manifests", "*", "*", "*", "*"))
	if err != nil {
		return nil, fmt.Errorf("ollama: %w", err)
	}
	sort.Strings(found)
	var out []layout.Source
	for _, p := range found {
		info, err := os.Lstat(p)
		if err != nil || info.IsDir() {
			continue
		}
		_, n, ok := splitManifestPath(p)
		if !ok {
			return nil, errs.New(errs.SchemaError, "ollama", "%s does not name a model (HOST/NAMESPACE/MODEL/TAG)", p)
		}
		src, err := source(abs, n)
		if err != nil { // this model is refused, not the others
			src = layout.Source{Name: n.ref(), Root: p, Err: err}
		}
		out = append(out, src)
	}
	if len(out) == 0 {
		return nil, errs.New(errs.NotFound, "ollama", "%s holds no model manifests (manifests/HOST/NAMESPACE/MODEL/TAG)", path)
	}
	return out, nil
}

// source reads and checks the manifest of n in the models folder.
func source(models string, n Name) (layout.Source, error) {
	where := filepath.Join(models, filepath.FromSlash(n.path()))
	if info, err := os.Lstat(filepath.Join(models, "blobs")); err != nil || !info.IsDir() {
		return layout.Source{}, errs.New(errs.PathTraversal, "ollama", "%s/blobs is not a folder (links are not followed)", models)
	}
	info, err := os.Lstat(where)
	if err != nil {
		return layout.Source{}, fmt.Errorf("ollama: %w", err)
	}
	if !info.Mode().IsRegular() {
		return layout.Source{}, errs.New(errs.PathTraversal, "ollama", "%s is not a regular file (links are not followed)", where)
	}
	b, err := layout.ReadFile(where, maxManifest)
	if err != nil {
		return layout.Source{}, err
	}
	m, err := parseManifest(b, where)
	if err != nil {
		return layout.Source{}, err
	}
	if !utf8.Valid(b) {
		return layout.Source{}, errs.New(errs.SchemaError, "ollama", "%s is not UTF-8", where)
	}
	names, err := fileNames(m, where)
	if err != nil {
		return layout.Source{}, err
	}
	src := layout.Source{Name: n.ref(), Root: models, Files: map[string]string{},
		Message: "add " + n.String() + " from an Ollama models folder",
		Meta:    map[string]string{MetaName: n.String(), MetaManifest: string(b)}}
	if refs.ValidTag(n.Tag) {
		src.Tag = n.Tag
	}
	for i, l := range append([]layer{m.Config}, m.Layers...) {
		if err := verifyBlob(models, l); err != nil {
			return layout.Source{}, err
		}
		src.Files[names[i]] = blobPath(l.Digest)
		src.Bytes += l.Size
	}
	return src, nil
}

// verifyBlob checks a layer's blob: a regular file of its size whose
// sha256 is its digest.
func verifyBlob(models string, l layer) error {
	p := filepath.Join(models, filepath.FromSlash(blobPath(l.Digest)))
	info, err := os.Lstat(p)
	if err != nil {
		if os.IsNotExist(err) {
			return errs.New(errs.NotFound, "ollama", "layer %s (%s) has no blob %s; pull the model again", l.Digest, l.MediaType, p)
		}
		return fmt.Errorf("ollama: %w", err)
	}
	if !info.Mode().IsRegular() {
		return errs.New(errs.PathTraversal, "ollama", "%s is not a regular file (links are not followed)", p)
	}
	if info.Size() != l.Size {
		return errs.New(errs.IntegrityError, "ollama", "%s is %d bytes, the manifest says %d; pull the model again", p, info.Size(), l.Size)
	}
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("ollama: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, l.Size)); err != nil {
		return fmt.Errorf("ollama: %w", err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != l.Digest {
		return errs.New(errs.IntegrityError, "ollama", "%s hashes to %s, not %s; pull the model again", p, got, l.Digest)
	}
	return nil
}

// isGGUF reports whether p is a GGUF file name (not a gguf-split shard).
func isGGUF(p string) bool { return strings.EqualFold(filepath.Ext(p), ".gguf") }

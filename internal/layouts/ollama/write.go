package ollama

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"sort"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/layouts/layout"
)

func sha(int64) hash.Hash { return sha256.New() }

// config is ollama's ConfigV2, as a models folder needs it for a model
// that came without one.
type config struct {
	ModelFormat   string   `json:"model_format"`
	ModelFamily   string   `json:"model_family"`
	ModelFamilies []string `json:"model_families"`
	ModelType     string   `json:"model_type"`
	FileType      string   `json:"file_type"`
	RootFS        struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// Write lays m out under the models folder dest: its blobs and manifest.
func (ollamaLayout) Write(m layout.Model, dest string, opts layout.WriteOptions) (*layout.Written, error) {
	man, names, name, err := plan(m)
	if err != nil {
		return nil, err
	}
	// What the restored files are now: a checkout with --dtype or
	// --tensors changes them, and the manifest then names the new ones.
	layers := append([]*layer{&man.Config}, ptrs(man.Layers)...)
	for i, l := range layers {
		p := filepath.Join(m.Dir, filepath.FromSlash(names[i]))
		info, err := os.Stat(p)
		if err != nil {
			return nil, errs.New(errs.UnsupportedVersion, "ollama", "the checkout has no %s for layer %s; ollama serves GGUF: check out without --format", names[i], l.MediaType)
		}
		sum, err := layout.HashFile(p, sha)
		if err != nil {
			return nil, err
		}
		l.Digest, l.Size = "sha256:"+sum, info.Size()
	}
	b := []byte(m.Manifest.Meta[MetaManifest])
	if orig, err := parseManifest(b, "the recorded manifest"); err != nil || !sameLayers(orig, man) {
		b = encode(man)
	}
	mpath := filepath.Join(dest, filepath.FromSlash(name.path()))
	dirs := []string{filepath.Join(dest, "blobs")}
	for d := filepath.Dir(mpath); d != dest && d != filepath.Dir(d); d = filepath.Dir(d) {
		dirs = append(dirs, d)
	}
	if err := layout.RealDirs(dirs...); err != nil {
		return nil, err
	}
	if cur, err := os.ReadFile(mpath); err == nil && !bytes.Equal(cur, b) && !opts.Force {
		return nil, errs.New(errs.Conflict, "ollama", "%s is there and names other layers; nothing was written (--force replaces it)", mpath)
	}
	w := &layout.Written{Layout: "ollama", Path: mpath, Root: dest, Name: name.String()}
	for i, l := range layers {
		h, _ := hexOf(l.Digest)
		wrote, err := layout.PutBlob(filepath.Join(m.Dir, filepath.FromSlash(names[i])), filepath.Join(dest, "blobs", "sha256-"+h), sha, h)
		if err != nil {
			return nil, err
		}
		w.Files++
		w.Bytes += l.Size
		if wrote {
			w.NewBlobs++
		}
	}
	if err := layout.WriteFile(mpath, b); err != nil {
		return nil, err
	}
	return w, nil
}

func ptrs(ls []layer) []*layer {
	out := make([]*layer, len(ls))
	for i := range ls {
		out[i] = &ls[i]
	}
	return out
}

func sameLayers(a, b *manifest) bool {
	if a.Config != b.Config || len(a.Layers) != len(b.Layers) {
		return false
	}
	for i := range a.Layers {
		if a.Layers[i] != b.Layers[i] {
			return false
		}
	}
	return true
}

// plan is the manifest to write (digests still to fill in), each blob's
// file in the checkout, and the model's name: what add recorded, else a
// model of the checkout's one GGUF file named after the ref.
func plan(m layout.Model) (*manifest, []string, Name, error) {
	if rec := m.Manifest.Meta[MetaManifest]; rec != "" {
		man, err := parseManifest([]byte(rec), "the recorded manifest")
		if err != nil {
			return nil, nil, Name{}, err
		}
		names, err := fileNames(man, "the recorded manifest")
		if err != nil {
			return nil, nil, Name{}, err
		}
		n, ok := parseName(m.Manifest.Meta[MetaName])
		if !ok {
			return nil, nil, Name{}, errs.New(errs.SchemaError, "ollama", "version %s records the ollama name %q, which is not HOST/NAMESPACE/MODEL:TAG", m.Digest.Short(), m.Manifest.Meta[MetaName])
		}
		return man, names, n, nil
	}
	n, ok := nameOfRef(m.Name, m.Tag)
	if !ok {
		return nil, nil, Name{}, errs.New(errs.SchemaError, "ollama", "version %s has no ollama name; check it out by a ref name of at most three parts (MODEL, NAMESPACE/MODEL, HOST/NAMESPACE/MODEL)", m.Digest.Short())
	}
	// The checkout's files, not the manifest's: with --format gguf they
	// are the conversion's.
	var ggufs []string
	entries, err := os.ReadDir(m.Dir)
	if err != nil {
		return nil, nil, Name{}, fmt.Errorf("ollama: %w", err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() && isGGUF(e.Name()) {
			ggufs = append(ggufs, e.Name())
		}
	}
	sort.Strings(ggufs)
	if len(ggufs) != 1 {
		return nil, nil, Name{}, errs.New(errs.UnsupportedVersion, "ollama", "version %s has %d GGUF files; ollama serves a model of one (check out with --format gguf)", m.Digest.Short(), len(ggufs))
	}
	// The config names the model layer by its digest, which is known only
	// once the file is hashed: it is written beside the checkout's files.
	sum, err := layout.HashFile(filepath.Join(m.Dir, filepath.FromSlash(ggufs[0])), sha)
	if err != nil {
		return nil, nil, Name{}, err
	}
	var c config
	if err := details(&c, filepath.Join(m.Dir, filepath.FromSlash(ggufs[0]))); err != nil {
		return nil, nil, Name{}, err
	}
	c.ModelFormat, c.Architecture, c.OS = "gguf", "amd64", "linux"
	c.RootFS.Type, c.RootFS.DiffIDs = "layers", []string{"sha256:" + sum}
	cb, _ := json.Marshal(c)
	cfg := ".ollama-config.json"
	if err := os.WriteFile(filepath.Join(m.Dir, cfg), cb, 0o644); err != nil {
		return nil, nil, Name{}, fmt.Errorf("ollama: %w", err)
	}
	man := &manifest{SchemaVersion: 2, MediaType: manifestMediaType,
		Config: layer{MediaType: configMediaType}, Layers: []layer{{MediaType: modelMediaType}}}
	return man, []string{cfg, ggufs[0]}, n, nil
}

package ollama

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/mstore/mstore/internal/errs"
)

const (
	manifestMediaType = "application/vnd.docker.distribution.manifest.v2+json"
	configMediaType   = "application/vnd.docker.container.image.v1+json"
	layerPrefix       = "application/vnd.ollama.image."
	modelMediaType    = layerPrefix + "model"
	// DefaultHost and DefaultNamespace are what ollama fills in for a
	// short name (types/model/name.go).
	DefaultHost      = "registry.ollama.ai"
	DefaultNamespace = "library"
	// maxManifest and maxLayers bound a manifest read from disk.
	maxManifest = 1 << 20
	maxLayers   = 1024

	// Metadata keys recorded in the manifest.
	MetaName     = "ollama.name"
	MetaManifest = "ollama.manifest"
)

// manifest is ollama's ManifestV2.
type manifest struct {
	SchemaVersion int     `json:"schemaVersion"`
	MediaType     string  `json:"mediaType"`
	Config        layer   `json:"config"`
	Layers        []layer `json:"layers"`
}

// layer is ollama's Layer.
type layer struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
	From      string `json:"from,omitempty"`
}

// parseManifest decodes and checks a manifest's schema.
func parseManifest(b []byte, where string) (*manifest, error) {
	if len(b) > maxManifest {
		return nil, errs.New(errs.SizeLimitExceeded, "ollama", "%s is longer than %d bytes", where, maxManifest)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, errs.Wrap(errs.SchemaError, "ollama", err, "%s is not an ollama manifest", where)
	}
	if m.SchemaVersion != 2 || m.MediaType != manifestMediaType {
		return nil, errs.New(errs.UnsupportedVersion, "ollama", "%s: schemaVersion %d, mediaType %q (this build reads schemaVersion 2, %s)", where, m.SchemaVersion, m.MediaType, manifestMediaType)
	}
	if m.Config.MediaType != configMediaType {
		return nil, errs.New(errs.UnsupportedVersion, "ollama", "%s: config mediaType %q (this build reads %s)", where, m.Config.MediaType, configMediaType)
	}
	if len(m.Layers) > maxLayers {
		return nil, errs.New(errs.SizeLimitExceeded, "ollama", "%s has %d layers (at most %d are read)", where, len(m.Layers), maxLayers)
	}
	models := 0
	for _, l := range append([]layer{m.Config}, m.Layers...) {
		if _, err := hexOf(l.Digest); err != nil || l.Size < 0 {
			return nil, errs.New(errs.SchemaError, "ollama", "%s: layer %q has digest %q, size %d (want sha256:64 hex digits, a size ≥ 0)", where, l.MediaType, l.Digest, l.Size)
		}
		if l.MediaType == modelMediaType {
			models++
		}
	}
	if models != 1 {
		return nil, errs.New(errs.UnsupportedVersion, "ollama", "%s has %d model layers (this build reads a model of one GGUF layer)", where, models)
	}
	return &m, nil
}

// hexOf is the hex digits of a "sha256:…" digest.
func hexOf(digest string) (string, error) {
	h, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		return "", fmt.Errorf("not a sha256 digest")
	}
	return h, nil
}

// blobPath is a digest's file under the models folder.
func blobPath(digest string) string {
	h, _ := hexOf(digest) // parseManifest checked it
	return "blobs/sha256-" + h
}

// fileNames names each of m's blobs as a model file, in the manifest's
// order: the config first, then each layer. A kind seen before gets a
// number (license, license-2).
func fileNames(m *manifest, where string) ([]string, error) {
	names := []string{"config.json"}
	seen := map[string]int{}
	for _, l := range m.Layers {
		kind, _, _ := strings.Cut(strings.TrimPrefix(l.MediaType, layerPrefix), ";")
		kind = strings.TrimSpace(kind)
		if !strings.HasPrefix(l.MediaType, layerPrefix) || kind == "" || strings.Trim(kind, "abcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
			return nil, errs.New(errs.UnsupportedVersion, "ollama", "%s: layer mediaType %q is not an ollama layer this build reads", where, l.MediaType)
		}
		name := kind
		if kind == "model" {
			name = "model.gguf"
		}
		if seen[kind]++; seen[kind] > 1 {
			name += "-" + strconv.Itoa(seen[kind])
		}
		names = append(names, name)
	}
	return names, nil
}

// encode writes m as ollama's WriteManifest does (json.Encoder: a newline
// at the end).
func encode(m *manifest) []byte {
	var buf bytes.Buffer
	json.NewEncoder(&buf).Encode(m) // plain strings and numbers always encode
	return buf.Bytes()
}

// Name is a model's name in ollama: HOST/NAMESPACE/MODEL:TAG.
type Name struct{ Host, Namespace, Model, Tag string }

func (n Name) String() string { return n.Host + "/" + n.Namespace + "/" + n.Model + ":" + n.Tag }

// path is the manifest's path under the models folder.
func (n Name) path() string {
	return "manifests/" + n.Host + "/" + n.Namespace + "/" + n.Model + "/" + n.Tag
}

// ref is the mstore ref a model is added as.
func (n Name) ref() string {
	switch {
	case n.Host == DefaultHost && n.Namespace == DefaultNamespace:
		return n.Model
	case n.Host == DefaultHost:
		return n.Namespace + "/" + n.Model
	}
	return n.Host + "/" + n.Namespace + "/" + n.Model
}

// parseName reads HOST/NAMESPACE/MODEL:TAG (as MetaName records it).
func parseName(s string) (Name, bool) {
	i := strings.LastIndex(s, ":") // the last: a host may have a port
	if i < 0 {
		return Name{}, false
	}
	parts := strings.Split(s[:i], "/")
	if len(parts) != 3 {
		return Name{}, false
	}
	n := Name{parts[0], parts[1], parts[2], s[i+1:]}
	return n, n.valid()
}

// valid checks each part as ollama's types/model/name.go does: letters,
// digits, '_', '-' and '.' (not in a namespace, never two in a row; a host
// may have a port), at most 128 bytes. So a part is always one clean path
// component.
func (n Name) valid() bool {
	for i, p := range []string{n.Host, n.Namespace, n.Model, n.Tag} {
		if p == "" || p == "." || len(p) > 128 || strings.Contains(p, "..") {
			return false
		}
		for _, c := range []byte(p) {
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' ||
				c == '.' && i != 1 || c == ':' && i == 0
			if !ok {
				return false
			}
		}
	}
	return true
}

// nameOfRef is the ollama name of an mstore ref (ref's inverse; tag
// latest when none).
func nameOfRef(ref, tag string) (Name, bool) {
	if tag == "" {
		tag = "latest"
	}
	parts := strings.Split(ref, "/")
	var n Name
	switch len(parts) {
	case 1:
		n = Name{DefaultHost, DefaultNamespace, parts[0], tag}
	case 2:
		n = Name{DefaultHost, parts[0], parts[1], tag}
	case 3:
		n = Name{parts[0], parts[1], parts[2], tag}
	default:
		return Name{}, false
	}
	return n, n.valid()
}

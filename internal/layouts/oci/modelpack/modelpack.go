package modelpack

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

const pkg = "modelpack"

// Media types and annotations of the model-spec (specs-go/v1).
const (
	ArtifactType        = "application/vnd.cncf.model.manifest.v1+json"
	MediaTypeConfig     = "application/vnd.cncf.model.config.v1+json"
	MediaTypeWeight     = "application/vnd.cncf.model.weight.v1.raw"
	MediaTypeWeightConf = "application/vnd.cncf.model.weight.config.v1.raw"
	MediaTypeDoc        = "application/vnd.cncf.model.doc.v1.raw"
	MediaTypeCode       = "application/vnd.cncf.model.code.v1.raw"
	AnnotationFilepath  = "org.cncf.model.filepath"
	// AnnotationFileMetadata holds a file's tar-like metadata (name, mode,
	// size, mtime, typeflag), which extracting tools apply.
	AnnotationFileMetadata = "org.cncf.model.file.metadata+json"
	// MediaTypeMap is mstore's own layer (see the package doc).
	MediaTypeMap = "application/vnd.mstore.map.v1+json"
	// AnnotationDigest, on the map layer, is the mstore version's digest.
	AnnotationDigest = "org.mstore.manifest.digest"
)

// Bounds on what is read from outside.
const (
	// MaxDocumentBytes bounds an OCI manifest, index or model config.
	MaxDocumentBytes = 4 << 20
	// MaxLayers bounds the layers of one artifact.
	MaxLayers = 20000
	// MaxMapBytes bounds mstore's map layer (it holds the mstore manifest,
	// base64: a third more than remote.MaxManifestBytes).
	MaxMapBytes = 360 << 20
)

// LayerKind says how a layer holds its files.
type LayerKind int

const (
	_            LayerKind = iota
	LayerRaw               // the layer is the file's bytes
	LayerTar               // an uncompressed tar of files
	LayerTarGzip           // a gzipped tar of files
)

// Layer is one file layer of an artifact.
type Layer struct {
	Desc ocispec.Descriptor
	Path string // the org.cncf.model.filepath annotation, checked clean
	Kind LayerKind
}

// Artifact is a parsed ModelPack manifest.
type Artifact struct {
	Manifest ocispec.Manifest
	Layers   []Layer
	// Map is mstore's map layer, nil when the artifact has none.
	Map *ocispec.Descriptor
}

// File is what a written artifact says about one model file.
type File struct {
	Path   string         `json:"path"`
	Size   int64          `json:"size"`
	SHA256 digest.Digest  `json:"sha256"`
	Digest objects.Digest `json:"digest"` // BLAKE3 of the file, as in the mstore manifest
}

// Map is the content of mstore's map layer.
type Map struct {
	Schema   int            `json:"schema"`
	Digest   objects.Digest `json:"digest"`
	Files    []File         `json:"files"`
	Manifest []byte         `json:"manifest"` // the encoded mstore manifest
}

// MediaTypeFor is the ModelPack media type of a model file: weights for
// the containers and their indexes, docs and code by name, config for the
// rest (tokenizer, config.json, …).
func MediaTypeFor(f objects.File) string {
	if f.Role == objects.RoleContainer || f.Role == objects.RoleIndex {
		return MediaTypeWeight
	}
	base := strings.ToLower(path.Base(f.Path))
	switch {
	case strings.HasSuffix(base, ".md"), strings.HasPrefix(base, "readme"), strings.HasPrefix(base, "license"), strings.HasPrefix(base, "notice"):
		return MediaTypeDoc
	case strings.HasSuffix(base, ".py"), strings.HasSuffix(base, ".sh"), strings.HasSuffix(base, ".ipynb"):
		return MediaTypeCode
	}
	return MediaTypeWeightConf
}

// Blob is a document to write beside the file layers. The map layer is
// not held whole: the map of a manifest of 100,000 tensors is 37 MB of
// base64 beside the manifest's 28 MB, so its bytes are made from the
// manifest each time they are read (Open), and its Data is nil.
type Blob struct {
	Desc ocispec.Descriptor
	Data []byte
	// The map layer's JSON: head, then the manifest in base64 and
	// closed as a string and an object.
	head, manifest []byte
}

// Open reads the blob's bytes from the start.
func (b Blob) Open() io.Reader {
	if b.Data != nil || b.head == nil {
		return bytes.NewReader(b.Data)
	}
	return io.MultiReader(bytes.NewReader(b.head), &base64Reader{src: b.manifest}, strings.NewReader(mapTail))
}

// Build returns the model config, the map layer and the manifest of the
// artifact of version d (m, encoded as enc) named name, whose files have
// the sha256s files gives in m's file order. The output is deterministic:
// no clocks, no hosts.
func Build(name string, d objects.Digest, m *objects.Manifest, enc []byte, files []File) (config, mapLayer, manifest Blob, err error) {
	if len(files) != len(m.Files) {
		return config, mapLayer, manifest, errs.New(errs.SchemaError, pkg, "%d file digests for %d files", len(files), len(m.Files))
	}
	var layers []ocispec.Descriptor
	var diffIDs []digest.Digest
	for i, f := range m.Files {
		meta, err := json.Marshal(fileMetadata{Name: path.Base(f.Path), Mode: 0o644, Size: f.Size, ModTime: time.Unix(0, 0).UTC(), Typeflag: '0'})
		if err != nil {
			return config, mapLayer, manifest, err
		}
		layers = append(layers, ocispec.Descriptor{MediaType: MediaTypeFor(f), Digest: files[i].SHA256, Size: f.Size,
			Annotations: map[string]string{AnnotationFilepath: f.Path, AnnotationFileMetadata: string(meta)}})
		diffIDs = append(diffIDs, files[i].SHA256) // a raw layer's DiffID is its digest
	}
	cfg := modelConfig{Descriptor: configDescriptor{Name: name}, ModelFS: modelFS{Type: "layers", DiffIDs: diffIDs}, Config: configConfig{Format: m.Format}}
	if config, err = blob(MediaTypeConfig, cfg, nil); err != nil {
		return
	}
	if mapLayer, err = mapBlob(Map{Schema: 1, Digest: d, Files: files, Manifest: enc}, map[string]string{AnnotationDigest: d.String()}); err != nil {
		return
	}
	layers = append(layers, mapLayer.Desc)
	man := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: ArtifactType, Config: config.Desc, Layers: layers,
		Annotations: map[string]string{AnnotationDigest: d.String()}}
	man.SchemaVersion = 2
	manifest, err = blob(ocispec.MediaTypeImageManifest, man, nil)
	manifest.Desc.ArtifactType = ArtifactType
	return
}

// mapBlob is the map layer m, whose JSON is json.Marshal(m): the encoded
// manifest's base64 is made as the blob is read (Blob.Open), not held.
// Marshalled by encoding/json, a map of 37 MB grew its buffer by doubling
// and was copied once more (0.16 s of `checkout --layout oci`), and held
// whole it was the largest part of the heap of that checkout.
// TestMapBlobIsJSONs holds it to encoding/json's bytes.
func mapBlob(m Map, ann map[string]string) (Blob, error) {
	enc := m.Manifest
	m.Manifest = nil
	head, err := json.Marshal(m)
	if err != nil || enc == nil {
		return blobOf(MediaTypeMap, head, ann), err
	}
	const null = `null}`
	if !bytes.HasSuffix(head, []byte(null)) {
		return Blob{}, fmt.Errorf("modelpack: the map's JSON ends %q, not with the manifest", head[max(0, len(head)-16):])
	}
	head = append(head[:len(head)-len(null)], '"')
	b := Blob{head: head, manifest: enc}
	sum := digest.SHA256.Digester()
	n, err := io.Copy(sum.Hash(), b.Open())
	if err != nil {
		return Blob{}, err
	}
	b.Desc = ocispec.Descriptor{MediaType: MediaTypeMap, Digest: sum.Digest(), Size: n, Annotations: ann}
	return b, nil
}

// mapTail closes the map layer's base64 string and its object.
const mapTail = `"}`

// base64Reader reads src in standard base64, a block at a time.
type base64Reader struct {
	src   []byte
	block []byte // encoded, not yet read
	buf   [base64Block / 3 * 4]byte
}

// base64Block is how many bytes of src base64Reader encodes at a time (a
// multiple of 3, so that only the last block is padded).
const base64Block = 48 << 10

func (r *base64Reader) Read(p []byte) (int, error) {
	if len(r.block) == 0 {
		if len(r.src) == 0 {
			return 0, io.EOF
		}
		n := min(len(r.src), base64Block)
		r.block = base64.StdEncoding.AppendEncode(r.buf[:0], r.src[:n])
		r.src = r.src[n:]
	}
	n := copy(p, r.block)
	r.block = r.block[n:]
	return n, nil
}

func blob(mediaType string, v any, ann map[string]string) (Blob, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Blob{}, err
	}
	return blobOf(mediaType, b, ann), nil
}

// blobOf is the blob of b, JSON already encoded.
func blobOf(mediaType string, b []byte, ann map[string]string) Blob {
	return Blob{Desc: ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b)), Annotations: ann}, Data: b}
}

// fileMetadata is specs-go/v1's FileMetadata. mstore keeps no clocks or
// owners, so every file is a regular 0644 file of the epoch, owned by 0.
type fileMetadata struct {
	Name     string    `json:"name"`
	Mode     uint32    `json:"mode"`
	UID      uint32    `json:"uid"`
	GID      uint32    `json:"gid"`
	Size     int64     `json:"size"`
	ModTime  time.Time `json:"mtime"`
	Typeflag byte      `json:"typeflag"`
}

// The model config, as specs-go/v1's Model, with only what mstore knows.
type modelConfig struct {
	Descriptor configDescriptor `json:"descriptor"`
	ModelFS    modelFS          `json:"modelfs"`
	Config     configConfig     `json:"config"`
}
type configDescriptor struct {
	Name string `json:"name,omitempty"`
}
type modelFS struct {
	Type    string          `json:"type"`
	DiffIDs []digest.Digest `json:"diffIds"`
}
type configConfig struct {
	Format string `json:"format,omitempty"`
}

// ConfigName returns the model name a model config gives, "" if none.
func ConfigName(b []byte) string {
	var c modelConfig
	if len(b) > MaxDocumentBytes || json.Unmarshal(b, &c) != nil {
		return ""
	}
	return c.Descriptor.Name
}

// CheckDescriptor refuses a descriptor whose digest is not a well-formed
// sha256 or whose size is out of bounds.
func CheckDescriptor(d ocispec.Descriptor, limit int64, what string) error {
	if d.Digest.Validate() != nil || d.Digest.Algorithm() != digest.SHA256 { // Algorithm panics on a malformed digest
		return errs.New(errs.SchemaError, pkg, "%s: digest %q is not a sha256 digest", what, d.Digest)
	}
	if d.Size < 0 || d.Size > limit {
		return errs.New(errs.SizeLimitExceeded, pkg, "%s: size %d outside 0..%d", what, d.Size, limit)
	}
	return nil
}

// MaxFileBytes bounds one file layer (1 TiB).
const MaxFileBytes = 1 << 40

// Parse reads an OCI image manifest holding a ModelPack artifact.
func Parse(b []byte) (*Artifact, error) {
	if len(b) > MaxDocumentBytes {
		return nil, errs.New(errs.SizeLimitExceeded, pkg, "manifest of %d bytes (at most %d)", len(b), MaxDocumentBytes)
	}
	var a Artifact
	if err := json.Unmarshal(b, &a.Manifest); err != nil {
		return nil, errs.Wrap(errs.SchemaError, pkg, err, "the OCI manifest is not valid JSON")
	}
	man := &a.Manifest
	if man.SchemaVersion != 2 || (man.MediaType != "" && man.MediaType != ocispec.MediaTypeImageManifest) {
		return nil, errs.New(errs.UnsupportedVersion, pkg, "OCI manifest schemaVersion %d, mediaType %q: want an OCI image manifest (schemaVersion 2)", man.SchemaVersion, man.MediaType)
	}
	if man.ArtifactType != ArtifactType && man.Config.MediaType != MediaTypeConfig {
		return nil, errs.New(errs.SchemaError, pkg, "not a ModelPack artifact: artifactType %q, config %q (want %s)", man.ArtifactType, man.Config.MediaType, ArtifactType)
	}
	if err := CheckDescriptor(man.Config, MaxDocumentBytes, "model config"); err != nil {
		return nil, err
	}
	if len(man.Layers) > MaxLayers {
		return nil, errs.New(errs.SizeLimitExceeded, pkg, "%d layers (at most %d)", len(man.Layers), MaxLayers)
	}
	seen := map[string]bool{}
	for i, l := range man.Layers {
		what := "layer " + l.Digest.String()
		if l.MediaType == MediaTypeMap {
			if a.Map != nil {
				return nil, errs.New(errs.SchemaError, pkg, "two mstore map layers")
			}
			if err := CheckDescriptor(l, MaxMapBytes, what); err != nil {
				return nil, err
			}
			a.Map = &man.Layers[i]
			continue
		}
		if err := CheckDescriptor(l, MaxFileBytes, what); err != nil {
			return nil, err
		}
		kind, err := kindOf(l.MediaType)
		if err != nil {
			return nil, err
		}
		p := l.Annotations[AnnotationFilepath]
		if p == "" && kind == LayerRaw {
			return nil, errs.New(errs.SchemaError, pkg, "%s has no %s annotation: which file is it?", what, AnnotationFilepath)
		}
		if p != "" {
			if p = strings.TrimSuffix(p, "/"); !objects.IsCleanPath(p) {
				return nil, errs.New(errs.PathTraversal, pkg, "%s: file path %q leaves the model directory", what, l.Annotations[AnnotationFilepath])
			}
		}
		if kind == LayerRaw {
			if seen[p] {
				return nil, errs.New(errs.SchemaError, pkg, "two layers for file %q", p)
			}
			seen[p] = true
		}
		a.Layers = append(a.Layers, Layer{Desc: l, Path: p, Kind: kind})
	}
	return &a, nil
}

func kindOf(mt string) (LayerKind, error) {
	switch {
	case strings.HasPrefix(mt, "application/vnd.cncf.model.") && strings.HasSuffix(mt, ".raw"):
		return LayerRaw, nil
	case strings.HasSuffix(mt, ".tar"), mt == ocispec.MediaTypeImageLayer:
		return LayerTar, nil
	case strings.HasSuffix(mt, ".tar+gzip"), mt == ocispec.MediaTypeImageLayerGzip:
		return LayerTarGzip, nil
	}
	return 0, errs.New(errs.UnsupportedVersion, pkg, "layer media type %q: this build reads raw, tar and tar+gzip ModelPack layers", mt)
}

// DecodeMap reads mstore's map layer and checks it against itself (the
// manifest hashes to its digest) and against the artifact's layers (one
// raw layer per file, with the map's sha256 and size).
func DecodeMap(b []byte, a *Artifact) (*Map, *objects.Manifest, error) {
	var mp Map
	if err := json.Unmarshal(b, &mp); err != nil {
		return nil, nil, errs.Wrap(errs.SchemaError, pkg, err, "the mstore map layer is not valid JSON")
	}
	if mp.Schema != 1 {
		return nil, nil, errs.New(errs.UnsupportedVersion, pkg, "mstore map schema %d (this build reads 1)", mp.Schema)
	}
	if err := objects.Verify(mp.Manifest, mp.Digest, "the mstore manifest in the map layer"); err != nil {
		return nil, nil, err
	}
	m, err := objects.DecodeManifest(mp.Manifest)
	if err != nil {
		return nil, nil, err
	}
	if len(mp.Files) != len(m.Files) || len(a.Layers) != len(m.Files) {
		return nil, nil, errs.New(errs.SchemaError, pkg, "the map lists %d files, the mstore manifest %d, the artifact %d layers", len(mp.Files), len(m.Files), len(a.Layers))
	}
	byPath := map[string]Layer{}
	for _, l := range a.Layers {
		byPath[l.Path] = l
	}
	for i, f := range m.Files {
		mf := mp.Files[i]
		l, ok := byPath[f.Path]
		if mf.Path != f.Path || mf.Size != f.Size || mf.Digest != f.Digest || !ok || l.Kind != LayerRaw || l.Desc.Digest != mf.SHA256 || l.Desc.Size != f.Size {
			return nil, nil, errs.New(errs.SchemaError, pkg, "file %q: the map, the mstore manifest and the layers disagree", f.Path)
		}
	}
	return &mp, m, nil
}

// Span is where a blob's bytes lie: in the file at Path, from Off.
type Span struct {
	Path string
	Off  int64
	Size int64
}

// Locate finds, for every blob m needs, one place inside m's files that
// holds its bytes (tensor and frame runs are cut into chunks at fixed
// offsets from their start). A blob no file holds is absent.
func Locate(m *objects.Manifest) map[objects.Digest]Span {
	out := map[objects.Digest]Span{}
	add := func(p string, at, size int64, chunks []objects.Digest) {
		for i, d := range chunks {
			if _, ok := out[d]; !ok {
				off, n := objects.ChunkBounds(size, i)
				out[d] = Span{Path: p, Off: at + off, Size: n}
			}
		}
	}
	for _, f := range m.Files {
		var at int64
		for _, e := range f.Extents {
			switch {
			case e.Kind == objects.ExtentTensor && e.Tensor >= 0 && e.Tensor < len(m.Tensors):
				t := m.Tensors[e.Tensor]
				if t.Size == e.Size {
					add(f.Path, at, t.Size, t.Chunks)
				}
			case e.Kind == objects.ExtentFrame && e.Data != nil:
				add(f.Path, at, e.Size, e.Data.Chunks)
			}
			at += e.Size
		}
	}
	return out
}

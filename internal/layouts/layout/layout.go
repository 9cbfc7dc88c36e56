package layout

import (
	"context"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/progress"
	"github.com/mstore/mstore/internal/store"
)

// Layout is one tool's way of keeping models on disk (a Hugging Face
// cache, an Ollama models folder, an OCI image layout). Each layout is
// also a FileLayout or a VersionLayout, which say how add and checkout
// reach it.
type Layout interface {
	// Name is what `checkout --layout` takes ("hf-cache").
	Name() string
	// Detect reports whether path, given to add, is in this layout.
	Detect(path string) bool
}

// FileLayout keeps plain model files: add takes in the models it lists
// through the archiver, and checkout writes a restored model directory
// into it.
type FileLayout interface {
	Layout
	// Sources lists the models at path (which Detect took), in the order
	// they are to be added: each becomes one version of one ref.
	Sources(path string) ([]Source, error)
	// Write lays the restored model m out under dest, the layout's root
	// (a hub folder, a models folder).
	Write(m Model, dest string, opts WriteOptions) (*Written, error)
}

// VersionLayout keeps whole versions with what mstore needs to rebuild
// them (an OCI image layout carrying mstore's map layer): add imports the
// version itself, and checkout exports it straight from the store.
type VersionLayout interface {
	Layout
	// Import takes in the version at path (which Detect took).
	Import(ctx context.Context, st *store.Store, path string, o archiver.Options) (*archiver.Result, error)
	// Export writes version d of st at dest.
	Export(ctx context.Context, st *store.Store, d objects.Digest, dest string, o ExportOptions) (Exported, error)
}

// ExportOptions say how a VersionLayout writes a version.
type ExportOptions struct {
	// Name and Tag are the ref and tag it was named by ("" when given by
	// digest), for a layout that names what it writes.
	Name, Tag string
	// Force asks to replace dest; a layout that replaces nothing refuses it.
	Force    bool
	Progress progress.Reporter
}

// Exported is what a VersionLayout wrote: printed as JSON with --json,
// else as its one-line String.
type Exported interface {
	String() string
}

// Source is one model a layout found for add.
type Source struct {
	// Name and Tag are the ref and tag the version is added as when the
	// user names none; Tag may be "".
	Name, Tag string
	// Message is the history entry: which revision of what it was.
	Message string
	// Root is the model directory, or with Files the folder they are in.
	Root string
	// Files, when set, maps each model path to the file under Root it is
	// read from (modeldir.OpenFiles); nil means Root is a model directory.
	Files map[string]string
	// Meta is recorded in the manifest (objects.Manifest.Meta).
	Meta map[string]string
	// Bytes is the model's size, for one progress display over many.
	Bytes int64
	// Err, when set, says why this model (of a folder of many) cannot be
	// read; the others are added nevertheless.
	Err error
}

// Model is a version restored for a layout to write: Dir holds its files
// (which Write may move from: it is a temporary checkout on dest's
// filesystem), Manifest what add recorded.
type Model struct {
	Dir      string
	Digest   objects.Digest
	Manifest *objects.Manifest
	// Name and Tag are the ref and tag it was checked out by ("" when
	// given by digest), for a layout that names what it writes.
	Name, Tag string
}

// WriteOptions say how to write a layout.
type WriteOptions struct {
	// Force lets a layout move a pointer that names something else now
	// (a cache's refs/main); nothing is ever deleted.
	Force bool
}

// Written is what a layout wrote.
type Written struct {
	Layout string `json:"layout"`
	// Path is what the model's tool is pointed at (a snapshot folder, a
	// manifest file); Root the layout's root.
	Path string `json:"path"`
	Root string `json:"root"`
	// Name is the model's name in the layout (ORG/NAME@REV, HOST/NS/NAME:TAG).
	Name     string `json:"name"`
	Files    int    `json:"files"`
	Bytes    int64  `json:"bytes"`
	NewBlobs int    `json:"new_blobs"` // blobs written (the others were there)
}

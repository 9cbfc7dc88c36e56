package formats

import "io"

// Codec is one container format's parser. Every codec passes the shared
// conformance suite in formats/formattest.
type Codec interface {
	// Name is the format's key, stored in manifests ("safetensors").
	Name() string
	// Claims reports whether the file at path (a clean relative slash path)
	// is one of this format's container or index files.
	Claims(path string) bool
	// Parse reads the claimed files at paths (sorted) in dir and returns
	// their layout. Unclaimed paths are never passed. Every length read is
	// bounded before allocation; failures are classified (internal/errs).
	Parse(dir Dir, paths []string) (*Layout, error)
}

// Limits are the bounds a user can set on add. MaxParseMemory is every
// codec's; the others are the codecs' own (LimitFlags), by flag name.
type Limits struct {
	// MaxParseMemory caps the parse budget of every codec (Budget): what
	// a parse may build from the metadata it reads. Zero means
	// DefaultMaxParseMemory.
	MaxParseMemory int64
	// Codec holds the values the user gave the limit flags that codecs
	// declare (LimitFlag.Name → value); a flag left out is absent, and the
	// codec's default holds.
	Codec map[string]int64
}

// LimitFlag is an add flag that bounds what one codec accepts (MPK's
// --max-archive-bytes). The CLI makes a flag of each; its value reaches the
// codec in Limits.Codec under Name.
type LimitFlag struct {
	Name  string // without "--"
	Usage string
	Size  bool // a byte size (5GB, 500MiB), else a positive integer
}

// LimitDeclarer is a codec with limits of its own.
type LimitDeclarer interface {
	Codec
	LimitFlags() []LimitFlag
}

// Limited is a codec that takes limits; the archiver hands it the user's.
type Limited interface {
	Codec
	WithLimits(Limits) Codec
}

// MetaCompression is the File.Meta key of a container file that is
// compressed on disk (an MPK .tar.gz): its value names the canonical
// encoding a checkout writes it in, and the File's Size, Extents (and, in a
// manifest, Digest) describe the decoded stream, which a Decoder gives.
const MetaCompression = "compression"

// Decoder is a codec whose layouts may hold compressed files (Meta
// [MetaCompression] set). Decode returns the decoded stream of such a file,
// which the archiver reads the file's extents from.
type Decoder interface {
	Codec
	Decode(dir Dir, path string) (io.ReadCloser, error)
}

// DirClaimer is a codec that claims fewer files inside a model directory
// than when a file is given on its own. MPK claims every archive-like name
// given alone (so that a wrong extension is refused as such), but in a
// directory only a real .tar.gz, so that a stray .gz beside another model's
// weights is kept as an opaque file instead of making the model ambiguous.
type DirClaimer interface {
	ClaimsInDir(path string) bool
}

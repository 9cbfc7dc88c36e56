package formats

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

// Limits are the bounds a user can set on add (--max-archive-bytes, …). A
// zero field means the codec's documented default.
type Limits struct {
	MaxArchiveBytes int64
	MaxEntries      int64
	MaxEntryBytes   int64
	MaxJSONDepth    int
}

// Limited is a codec that takes limits; the archiver hands it the user's.
type Limited interface {
	Codec
	WithLimits(Limits) Codec
}

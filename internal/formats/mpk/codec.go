package mpk

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"strconv"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
)

// Codec is the MPK codec. It takes limits (formats.Limited) and decodes the
// archives it lays out (formats.Decoder).
var Codec formats.Codec = codec{}

type codec struct{ limits formats.Limits }

// Name is the format's key in manifests.
func (codec) Name() string { return "mpk" }

// Claims takes names ending in .tar.gz and, in any case, .mpk, .tgz, .tar
// and .gz: Parse refuses all but a lowercase .tar.gz (invalid_archive), so
// that a wrongly named archive gets that answer rather than "no model".
func (codec) Claims(p string) bool { return claims(p) }

// ClaimsInDir implements formats.DirClaimer: inside a model directory only a
// lowercase .tar.gz is an archive to take in.
func (codec) ClaimsInDir(p string) bool { return strings.HasSuffix(p, ".tar.gz") }

// WithLimits returns the codec with the user's limits.
func (codec) WithLimits(l formats.Limits) formats.Codec { return codec{limits: l} }

// Meta keys of an archive's File (beside formats.MetaCompression).
const (
	MetaArchiveBytes  = "archive_bytes"  // the size of the archive as added
	MetaArchiveDigest = "archive_digest" // its BLAKE3
	MetaArchiveSHA256 = "archive_sha256" // its SHA-256
	MetaContracts     = "contracts"      // JSON: [{"member", "version"}]
	MetaStages        = "stages"         // JSON: the pipeline's stages in order
)

// Compression is the value of formats.MetaCompression on an archive: the
// tar stream is stored, and checked out through NewCanonicalWriter.
const Compression = "gzip-canonical"

// Parse loads the one archive among paths (see Load) and lays it out as
// its decompressed tar stream: one File of TarSize bytes whose extents are
// the frames between members and each member's content as a tensor (dtype
// U8, shape [size], named by its path in the archive), then the zero end
// marker. File.Meta records the compression and the archive as it was.
func (c codec) Parse(dir formats.Dir, paths []string) (*formats.Layout, error) {
	for _, p := range paths {
		if err := CheckName(p); err != nil {
			return nil, err
		}
	}
	if len(paths) != 1 {
		return nil, errs.New(errs.SchemaError, pkg, "%d MPK archives (%v) in one model; add each as its own model", len(paths), paths)
	}
	p := paths[0]
	lim := Limits(c.limits)
	size, err := dir.Stat(p)
	if err != nil {
		return nil, err
	}
	if size > lim.MaxArchiveBytes {
		return nil, errs.New(errs.SizeLimitExceeded, pkg, "%s is %d bytes, more than max_archive_bytes (%d)", p, size, lim.MaxArchiveBytes)
	}
	f, err := dir.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a, err := Load(io.NewSectionReader(f, 0, size), Options{Limits: c.limits, Name: p})
	if err != nil {
		return nil, err
	}
	return a.Layout(p), nil
}

// Layout is the layout of archive a stored at path p.
func (a *Archive) Layout(p string) *formats.Layout {
	l := &formats.Layout{Format: Codec.Name()}
	for _, m := range a.Members {
		l.Tensors = append(l.Tensors, formats.Tensor{Name: m.Name, DType: "U8", Shape: []int64{m.Size}, Size: m.Size})
	}
	l.Files = []formats.File{{Path: p, Size: a.TarSize, Extents: a.Extents, Meta: map[string]string{
		formats.MetaCompression: Compression,
		MetaArchiveBytes:        strconv.FormatInt(a.Size, 10),
		MetaArchiveDigest:       a.Digest.String(),
		MetaArchiveSHA256:       a.SHA256,
		MetaContracts:           mustJSON(a.Contracts),
		MetaStages:              mustJSON(a.Stages),
	}}}
	return l
}

// Decode returns the decompressed tar stream of the archive at p, at most
// max_archive_bytes of it.
func (c codec) Decode(dir formats.Dir, p string) (io.ReadCloser, error) {
	f, err := dir.Open(p)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(io.NewSectionReader(f, 0, f.Size()))
	if err != nil {
		f.Close()
		return nil, errs.Wrap(errs.InvalidArchive, pkg, err, "%s: not a gzip stream", p)
	}
	return decoded{Reader: &counter{r: zr, limit: Limits(c.limits).MaxArchiveBytes}, f: f}, nil
}

type decoded struct {
	io.Reader
	f io.Closer
}

func (d decoded) Close() error { return d.f.Close() }

// NewCanonicalWriter returns the gzip writer an archive is checked out
// through. Its output depends only on the bytes written and on the Go
// release's compress/flate: one gzip member, no name, comment or extra
// field, modification time 0, OS byte 255 ("unknown"), deflate level 6.
// The same tar stream therefore gives the same archive on every machine
// with the same mstore build (a Go release that changes compress/flate may
// change it; the tar stream inside never changes).
func NewCanonicalWriter(w io.Writer) io.WriteCloser {
	zw, err := gzip.NewWriterLevel(w, canonicalLevel)
	if err != nil {
		panic(err) // canonicalLevel is a valid level
	}
	return zw
}

const canonicalLevel = 6

// mustJSON encodes v (a slice of plain structs, which always encodes)
// without HTML escaping, as manifests are.
func mustJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

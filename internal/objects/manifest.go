package objects

import (
	"bytes"
	"encoding/json"
	"io"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mstore/mstore/internal/errs"
)

// ManifestSchema is the version of the manifest encoding this build writes
// and the only one it reads.
const ManifestSchema = 1

// Manifest is one model version: every file, how to rebuild it, and every
// tensor. It holds no clocks, hosts or absolute paths.
type Manifest struct {
	Schema int `json:"schema"`
	// Format is the container format the model was added as ("safetensors").
	Format  string   `json:"format"`
	Files   []File   `json:"files"`
	Tensors []Tensor `json:"tensors"`
	// Meta is where the model came from, when another tool's layout said
	// (a Hugging Face cache's repo and revision, an Ollama manifest). Like
	// the rest it is content: no clocks, hosts or absolute paths.
	Meta map[string]string `json:"meta,omitempty"`
}

// File is one file of the model, relative to the model's root.
type File struct {
	Path   string `json:"path"` // slash-separated, relative, clean
	Size   int64  `json:"size"`
	Digest Digest `json:"digest"` // BLAKE3 of the whole file
	// Role says what the file is to the model: a container file of Format,
	// or another file kept as it is (config.json, tokenizer.json, …).
	Role FileRole `json:"role"`
	// Meta is format-specific metadata a writer needs again (e.g.
	// SafeTensors' __metadata__).
	Meta    map[string]string `json:"meta,omitempty"`
	Extents []Extent          `json:"extents"`
}

// FileRole says what a file is to its model.
type FileRole string

const (
	RoleContainer FileRole = "container" // a weights file of the manifest's format
	RoleIndex     FileRole = "index"     // a shard index the codec regenerates
	RoleOther     FileRole = "other"     // kept byte for byte, never interpreted
)

// ExtentKind says what fills a run of a file's bytes.
type ExtentKind string

const (
	ExtentFrame  ExtentKind = "frame"  // bytes stored as blobs (Data)
	ExtentTensor ExtentKind = "tensor" // the bytes of Tensors[Tensor]
	ExtentZeros  ExtentKind = "zeros"  // Size zero bytes (padding)
)

// Extent is a run of a file's bytes. A file's extents cover it in order.
type Extent struct {
	Kind   ExtentKind `json:"kind"`
	Size   int64      `json:"size"`
	Tensor int        `json:"tensor,omitempty"` // index into Manifest.Tensors
	Data   *Data      `json:"data,omitempty"`   // for frames
}

// Data names a run of bytes: its digest and its chunk digests.
type Data struct {
	Digest Digest   `json:"digest"`
	Chunks []Digest `json:"chunks"`
}

// Tensor is one tensor: its bytes are named by Digest (independent of the
// name and the container) and stored as Chunks.
type Tensor struct {
	Name   string   `json:"name"`
	DType  string   `json:"dtype"`
	Shape  []int64  `json:"shape"`
	Size   int64    `json:"size"`
	Digest Digest   `json:"digest"`
	Chunks []Digest `json:"chunks"`
}

// Encode returns the canonical bytes of m: JSON with struct fields in
// declaration order, map keys sorted, no HTML escaping, no insignificant
// space (what encoding/json writes; codec.go writes it without
// reflection). Callers must have put Files in path order.
func (m *Manifest) Encode() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return appendManifest(make([]byte, 0, encodedLen(m)), m), nil
}

// WriteJSON writes m as encoding/json would (what Encode returns, for a
// valid manifest; m is not validated) to w, a file or tensor at a time:
// `show --json` of a model of 100,000 tensors printed its 28 MB manifest
// through encoding/json, 1.2 s and 209 MB.
func (m *Manifest) WriteJSON(w io.Writer) error {
	var err error
	encodeManifest(m, func(p []byte) bool {
		_, err = w.Write(p)
		return err == nil
	})
	return err
}

// DecodeManifest parses manifest bytes and checks them with Validate.
func DecodeManifest(b []byte) (*Manifest, error) {
	m, cut, ok := decodeCanonicalCut(b)
	if !ok || !sameEncodingCut(m, b, cut) {
		var err error
		if m, err = decodeWithJSON(b); err != nil {
			return nil, errs.Wrap(errs.IntegrityError, "objects", err, "manifest does not parse")
		}
	}
	if m.Schema != ManifestSchema {
		return nil, errs.New(errs.UnsupportedVersion, "objects", "manifest schema %d (this build reads %d)", m.Schema, ManifestSchema)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// decodeWithJSON decodes any spelling of a manifest that encoding/json
// takes (decodeCanonical reads only the canonical one).
func decodeWithJSON(b []byte) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Digest returns the manifest's id: the digest of its canonical encoding,
// and the encoding.
func (m *Manifest) Digest() (Digest, []byte, error) {
	if len(m.Tensors) >= max(halvesFrom, 2) {
		return m.digestInHalves()
	}
	if err := m.Validate(); err != nil {
		return Digest{}, nil, err
	}
	n := encodedLen(m)
	if n < hashBeside {
		b := appendManifest(make([]byte, 0, n), m)
		return Sum(b), b, nil
	}
	h := newPartHasher()
	b, sent := make([]byte, 0, n), 0
	encodeManifest(m, func(p []byte) bool {
		// b is never grown past n when its text is plain ASCII; if it is
		// grown, what was handed on is still the bytes it was.
		b = append(b, p...)
		sent = h.upTo(b, sent)
		return true
	})
	return h.end(b, sent), b, nil
}

// halvesFrom is the number of tensors from which Digest encodes the two
// halves of the tensor list at once.
var halvesFrom = 8192 // a variable for the tests

// digestInHalves is Digest for a long manifest: the second half of the
// tensor list is measured, encoded and the manifest validated on another
// goroutine, into the part of the one buffer that follows the first half's
// room, while this one encodes the first. For 100,000 tensors (27 MB) the
// encoding took 70-90 ms of an add, on one core of two.
func (m *Manifest) digestInHalves() (Digest, []byte, error) {
	// Each half holds a tensor at least: encodeRange from 0 writes the
	// head, to the last the tail.
	k := len(m.Tensors) / 2
	secondLen := make(chan int, 1)
	room := make(chan []byte, 1)
	second := make(chan []byte, 1)
	var verr error
	go func() {
		secondLen <- tensorsLen(m, k, len(m.Tensors)) + tailLen(m)
		b := <-room
		encodeRange(m, k, len(m.Tensors), func(p []byte) bool { b = append(b, p...); return true })
		verr = m.Validate()
		second <- b
	}()
	n1 := headLen(m) + tensorsLen(m, 0, k)
	n2 := <-secondLen
	b := make([]byte, n1+n2)
	// Each half appends within its own room: a bound of its length, exact
	// when its text is plain ASCII. Neither can reach the other's.
	room <- b[n1 : n1 : n1+n2]
	h := newPartHasher()
	first, sent := b[:0:n1], 0
	encodeRange(m, 0, k, func(p []byte) bool {
		first = append(first, p...)
		sent = h.upTo(first, sent)
		return true
	})
	rest := <-second
	if verr != nil {
		h.end(nil, 0)
		return Digest{}, nil, verr
	}
	if cap(first) != n1 || cap(rest) != n2 { // grown past its bound: never for a valid manifest
		h.end(nil, 0)
		return Digest{}, nil, errs.New(errs.IntegrityError, "objects", "manifest encoding outgrew its bound (%d, %d bytes): a bug in mstore, please report it", n1, n2)
	}
	// Text that is not plain ASCII leaves a gap after the first half.
	n := copy(b[len(first):], rest) + len(first)
	b = b[:n:n]
	return h.end(b, sent), b, nil
}

// partHasher hashes an encoding on another goroutine as it is written,
// hashBeside bytes at a time: for 100,000 tensors (27 MB) the hash had
// taken 12 ms after the encoding's 22.
type partHasher struct {
	parts chan []byte
	sum   chan Digest
}

func newPartHasher() *partHasher {
	h := &partHasher{parts: make(chan []byte, 4), sum: make(chan Digest, 1)}
	go func() {
		d := NewHasher()
		for p := range h.parts {
			d.Write(p)
		}
		h.sum <- d.Digest()
	}()
	return h
}

// upTo hands on b[sent:] once it is hashBeside bytes or more, and says
// how much of b has been handed on.
func (h *partHasher) upTo(b []byte, sent int) int {
	if len(b)-sent < hashBeside {
		return sent
	}
	h.parts <- b[sent:len(b):len(b)]
	return len(b)
}

// end hands on the rest of b from sent and returns the digest of all that
// was handed on.
func (h *partHasher) end(b []byte, sent int) Digest {
	for len(b)-sent > hashBeside {
		h.parts <- b[sent : sent+hashBeside : sent+hashBeside]
		sent += hashBeside
	}
	h.parts <- b[sent:len(b):len(b)]
	close(h.parts)
	return <-h.sum
}

// hashBeside is the size from which Digest hashes the encoding beside
// writing it, and the size of the pieces it hands on.
const hashBeside = 1 << 20

// Validate checks the manifest's internal consistency: sorted unique clean
// UTF-8 paths, extents that cover each file, tensor references in range,
// chunk counts that match sizes, and text that is valid UTF-8 throughout
// (JSON would silently replace invalid bytes: the manifest read back would
// name another file or tensor than the one added).
func (m *Manifest) Validate() error {
	bad := func(format string, args ...any) error {
		return errs.New(errs.SchemaError, "objects", "manifest: "+format, args...)
	}
	if err := m.checkText(); err != nil {
		return err
	}
	for i, f := range m.Files {
		if !IsCleanPath(f.Path) {
			return bad("file path %q is not a clean relative path", f.Path)
		}
		if i > 0 && m.Files[i-1].Path >= f.Path {
			return bad("files not in strict path order at %q", f.Path)
		}
		var covered int64
		for _, e := range f.Extents {
			if e.Size < 0 {
				return bad("%s: negative extent", f.Path)
			}
			switch e.Kind {
			case ExtentFrame:
				if e.Data == nil || len(e.Data.Chunks) != ChunkCount(e.Size) {
					return bad("%s: frame extent without matching chunks", f.Path)
				}
			case ExtentTensor:
				if e.Tensor < 0 || e.Tensor >= len(m.Tensors) || m.Tensors[e.Tensor].Size != e.Size {
					return bad("%s: tensor extent %d does not match a tensor", f.Path, e.Tensor)
				}
			case ExtentZeros:
			default:
				return bad("%s: unknown extent kind %q", f.Path, e.Kind)
			}
			covered += e.Size
		}
		if covered != f.Size {
			return bad("%s: extents cover %d bytes of %d", f.Path, covered, f.Size)
		}
	}
	for _, t := range m.Tensors {
		if t.Size < 0 || len(t.Chunks) != ChunkCount(t.Size) {
			return bad("tensor %q: %d chunks for %d bytes", t.Name, len(t.Chunks), t.Size)
		}
	}
	return nil
}

// checkText refuses a string field that is not valid UTF-8, quoting its
// bytes (escaped) so that the user can find it.
func (m *Manifest) checkText() error {
	bad := func(what, s string) error {
		return errs.New(errs.SchemaError, "objects", "manifest: %s %s is not valid UTF-8; rename it (only UTF-8 names can be stored)", what, strconv.Quote(s))
	}
	if !utf8.ValidString(m.Format) {
		return bad("format", m.Format)
	}
	meta := func(where string, meta map[string]string) error {
		for k, v := range meta {
			if !utf8.ValidString(k) {
				return bad(where+"metadata key", k)
			}
			if !utf8.ValidString(v) {
				return bad(where+"metadata value of "+strconv.Quote(k)+",", v)
			}
		}
		return nil
	}
	if err := meta("", m.Meta); err != nil {
		return err
	}
	for _, f := range m.Files {
		if !utf8.ValidString(f.Path) {
			return bad("file name", f.Path)
		}
		if err := meta(f.Path+": ", f.Meta); err != nil {
			return err
		}
	}
	for _, t := range m.Tensors {
		if !utf8.ValidString(t.Name) {
			return bad("tensor name", t.Name)
		}
		if !utf8.ValidString(t.DType) {
			return bad("tensor "+strconv.Quote(t.Name)+": dtype", t.DType)
		}
	}
	return nil
}

// CheckReadBack decodes encoded (what Encode returned) as a reader of the
// store would, with every check DecodeManifest makes: a store must never
// hold a manifest it cannot read back. (Encode refused text that JSON
// would not keep as it is, so what decodes is what was encoded.)
func CheckReadBack(encoded []byte) error {
	_, err := DecodeManifest(encoded)
	return err
}

// ChunkRefs is how many chunks the manifest's tensors and frames name, a
// chunk named twice counted twice: room for a list of them.
func (m *Manifest) ChunkRefs() int {
	n := 0
	for _, t := range m.Tensors {
		n += len(t.Chunks)
	}
	for _, f := range m.Files {
		for _, e := range f.Extents {
			if e.Data != nil {
				n += len(e.Data.Chunks)
			}
		}
	}
	return n
}

// Blobs returns every blob digest the manifest needs, each once, sorted.
func (m *Manifest) Blobs() []Digest {
	out := m.AppendBlobs(make([]Digest, 0, m.ChunkRefs()))
	SortDigests(out)
	return slices.Compact(out)
}

// AppendBlobs appends the digest of every blob m needs to out, in the
// manifest's order, a blob as often as m names it, and returns the
// extended slice: for a caller that gathers the blobs of many manifests
// and sorts them once (gc's marks).
func (m *Manifest) AppendBlobs(out []Digest) []Digest {
	for _, t := range m.Tensors {
		out = append(out, t.Chunks...)
	}
	for _, f := range m.Files {
		for _, e := range f.Extents {
			if e.Data != nil {
				out = append(out, e.Data.Chunks...)
			}
		}
	}
	return out
}

// LogicalBytes is the total size of the model's files.
func (m *Manifest) LogicalBytes() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// File returns the file at path p, or nil.
func (m *Manifest) File(p string) *File {
	i := sort.Search(len(m.Files), func(i int) bool { return m.Files[i].Path >= p })
	if i < len(m.Files) && m.Files[i].Path == p {
		return &m.Files[i]
	}
	return nil
}

// IsCleanPath reports whether p is a relative slash path that stays inside
// its root: no leading slash, no "." or ".." segments, no empty segments, no
// backslashes or NUL bytes.
func IsCleanPath(p string) bool {
	if p == "" || strings.ContainsAny(p, "\\\x00") || path.IsAbs(p) || path.Clean(p) != p {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
)

const pkg = "gguf"

// Magic opens every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the data alignment of a file without
// general.alignment (GGUF_DEFAULT_ALIGNMENT).
const DefaultAlignment = 32

// MaxHeaderSize bounds the header, key/values and tensor infos of one file:
// reading further is size_limit_exceeded. The largest real vocabularies
// (262,144 tokens with scores and merges) take a few MiB.
const MaxHeaderSize = 64 << 20

// MaxNameLength is the longest tensor name ggml keeps (GGML_MAX_NAME is 64
// with the terminating NUL).
const MaxNameLength = 63

// MaxDims is GGML_MAX_DIMS.
const MaxDims = 4

// Keys this codec reads or writes.
const (
	KeyAlignment    = "general.alignment"
	KeyFileType     = "general.file_type"
	KeySplitNo      = "split.no"            // u16, 0-based
	KeySplitCount   = "split.count"         // u16
	KeySplitTensors = "split.tensors.count" // i32, over all shards
)

// header is one file's parsed header.
type header struct {
	version   uint32
	kvs       []KV
	alignment int64
	tensors   []tensorInfo // in file order, which is data order
	infoEnd   int64        // where the tensor infos end
	kvEnds    []int64      // where each key/value ends; kvs[0] begins at byte 24
}

// tensorInfo is one tensor info. offset is relative to the data section.
type tensorInfo struct {
	name   string
	ne     []int64 // fastest dimension first, n_dims long
	dtype  string
	offset int64
	size   int64
	at     int64 // file offset of the info, for messages
}

// shape is the row-major shape: ne reversed.
func (t tensorInfo) shape() []int64 {
	s := make([]int64, len(t.ne))
	for i, d := range t.ne {
		s[len(t.ne)-1-i] = d
	}
	return s
}

// scanner reads a header front to back. Every length is checked against
// the bytes left in the file and against MaxHeaderSize before anything is
// allocated for it.
type scanner struct {
	r    *bufio.Reader
	pos  int64
	size int64
	path string
	buf  [8]byte
	// budget is charged for what the header makes the parser build; it
	// grows with the bytes read.
	budget *formats.Budget
}

// charge records n bytes built from the header read so far.
func (s *scanner) charge(n int64) error {
	s.budget.ReadTo(s.pos)
	return s.budget.Charge(n)
}

// relocate gives a classified error of this package the file and offset
// where it was found, and a prefix naming what was being read.
func (s *scanner) relocate(err error, at int64, prefix string) error {
	var e *errs.Error
	if !errors.As(err, &e) {
		return err
	}
	c := *e
	c.Path, c.Offset = s.path, at
	if prefix != "" {
		c.Msg = prefix + ": " + c.Msg
	}
	return &c
}

func (s *scanner) fail(class errs.Class, at int64, format string, args ...any) error {
	return errs.At(class, pkg, s.path, at, format, args...)
}

// need checks that n more bytes are in the file and in the header limit.
func (s *scanner) need(n uint64, what string) error {
	if left := uint64(s.size - s.pos); n > left {
		return s.fail(errs.InvalidArchive, s.pos, "%s needs %d bytes, %d are left in the file", what, n, left)
	}
	if n > uint64(MaxHeaderSize-s.pos) {
		return s.fail(errs.SizeLimitExceeded, s.pos, "%s takes the header past the %d-byte limit", what, MaxHeaderSize)
	}
	return nil
}

func (s *scanner) read(b []byte, what string) error {
	if err := s.need(uint64(len(b)), what); err != nil {
		return err
	}
	if _, err := io.ReadFull(s.r, b); err != nil {
		return errs.Wrap(errs.InvalidArchive, pkg, err, "%s: read %s at byte %d", s.path, what, s.pos)
	}
	s.pos += int64(len(b))
	return nil
}

func (s *scanner) u32(what string) (uint32, error) {
	err := s.read(s.buf[:4], what)
	return binary.LittleEndian.Uint32(s.buf[:4]), err
}

func (s *scanner) u64(what string) (uint64, error) {
	err := s.read(s.buf[:8], what)
	return binary.LittleEndian.Uint64(s.buf[:8]), err
}

func (s *scanner) str(what string) (string, error) {
	n, err := s.u64("string length")
	if err != nil {
		return "", err
	}
	if err := s.need(n, what); err != nil {
		return "", err
	}
	if n <= uint64(s.r.Size()) { // the common case: one allocation, no copy in between
		b, err := s.r.Peek(int(n))
		if err != nil {
			return "", errs.Wrap(errs.InvalidArchive, pkg, err, "%s: read %s at byte %d", s.path, what, s.pos)
		}
		str := string(b)
		s.r.Discard(int(n))
		s.pos += int64(n)
		return str, nil
	}
	b := make([]byte, n) // bounded by need
	if err := s.read(b, what); err != nil {
		return "", err
	}
	return string(b), nil
}

// readHeader reads and checks the header of the file at p: magic, version,
// key/values, general.alignment and tensor infos. Tensor data is not read.
func readHeader(f formats.ReadAtCloser, p string, lim formats.Limits) (*header, error) {
	s := &scanner{r: bufio.NewReaderSize(io.NewSectionReader(f, 0, f.Size()), 64<<10), size: f.Size(), path: p,
		budget: lim.Budget(pkg, p, 0)}
	var magic [4]byte
	if err := s.read(magic[:], "magic"); err != nil {
		return nil, err
	}
	if string(magic[:]) != Magic {
		return nil, s.fail(errs.InvalidArchive, 0, "not a GGUF file: magic %q, want %q", magic[:], Magic)
	}
	h := &header{}
	var err error
	if h.version, err = s.u32("version"); err != nil {
		return nil, err
	}
	switch {
	case h.version&0xffff == 0 && h.version != 0:
		return nil, s.fail(errs.UnsupportedVersion, 4, "version %#x: a byte-swapped (big-endian) file, which this build does not read", h.version)
	case h.version == 1:
		return nil, s.fail(errs.UnsupportedVersion, 4, "GGUF v1 (32-bit counts) is no longer supported; convert it with a current llama.cpp")
	case h.version < 2 || h.version > 3:
		return nil, s.fail(errs.UnsupportedVersion, 4, "GGUF version %d (this build reads 2 and 3)", h.version)
	}
	nTensors, err := s.u64("tensor count")
	if err != nil {
		return nil, err
	}
	nKV, err := s.u64("key/value count")
	if err != nil {
		return nil, err
	}
	// Each key/value takes at least 13 bytes, each tensor info 25: the
	// counts must fit in the file, and in the header limit, before anything
	// is allocated for them.
	if left := uint64(s.size - s.pos); nKV > left/13 || nTensors > left/25 || nKV*13+nTensors*25 > left {
		return nil, s.fail(errs.InvalidArchive, 8, "%d tensors and %d key/values cannot fit in the %d bytes left", nTensors, nKV, left)
	}
	if err := s.need(nKV*13+nTensors*25, "the key/values and tensor infos"); err != nil {
		return nil, err
	}
	if err := h.readKVs(s, int(nKV)); err != nil {
		return nil, err
	}
	if h.alignment, err = alignmentOf(h.kvs); err != nil {
		return nil, s.relocate(err, 24, "")
	}
	if err := h.readInfos(s, int(nTensors)); err != nil {
		return nil, err
	}
	h.infoEnd = s.pos
	return h, nil
}

func (h *header) readKVs(s *scanner, n int) error {
	h.kvs = make([]KV, 0, n)
	h.kvEnds = make([]int64, 0, n)
	seen := make(map[string]bool, n)
	for range n {
		at := s.pos
		key, err := s.str("key")
		if err != nil {
			return err
		}
		if err := checkKey(key); err != nil {
			return s.relocate(err, at, "")
		}
		if seen[key] {
			return s.fail(errs.SchemaError, at, "key %q appears twice", key)
		}
		seen[key] = true
		v, err := readValue(s)
		if err != nil {
			return err
		}
		h.kvs = append(h.kvs, KV{Key: key, Value: v})
		h.kvEnds = append(h.kvEnds, s.pos)
		// The value as read, and as JSON in the manifest (EncodeKVs).
		if err := s.charge(2*kvSize(h.kvs[len(h.kvs)-1]) + jsonSize(v) + 64); err != nil {
			return err
		}
	}
	return nil
}

// checkKey refuses keys that cannot be kept exactly in a manifest.
func checkKey(key string) error {
	switch {
	case key == "":
		return errs.New(errs.SchemaError, pkg, "empty key")
	case !utf8.ValidString(key) || strings.ContainsRune(key, 0):
		return errs.New(errs.SchemaError, pkg, "key %q is not UTF-8 text", key)
	}
	return nil
}

func readValue(s *scanner) (Value, error) {
	at := s.pos
	t, err := s.u32("value type")
	if err != nil {
		return Value{}, err
	}
	v := Value{Type: ValueType(t)}
	n := uint64(1)
	if v.Type == TypeArray {
		v.Array = true
		if t, err = s.u32("array element type"); err != nil {
			return Value{}, err
		}
		v.Type = ValueType(t)
		if v.Type == TypeArray {
			return Value{}, s.fail(errs.UnsupportedVersion, at, "nested arrays are not supported")
		}
		if n, err = s.u64("array length"); err != nil {
			return Value{}, err
		}
	}
	if v.Type >= typeCount {
		return Value{}, s.fail(errs.UnsupportedVersion, at, "unknown value type %d", t)
	}
	if v.Type == TypeString {
		if n > uint64(s.size-s.pos)/8 {
			return Value{}, s.fail(errs.InvalidArchive, at, "%d strings cannot fit in the %d bytes left", n, s.size-s.pos)
		}
		if err := s.need(n*8, "string array"); err != nil {
			return Value{}, err
		}
		v.Strs = make([]string, n) // n*8 bytes of lengths are in the file and the header limit
		for i := range v.Strs {
			if v.Strs[i], err = s.str("string"); err != nil {
				return Value{}, err
			}
		}
		return v, nil
	}
	w := uint64(v.Type.width())
	if n > uint64(s.size-s.pos)/w {
		return Value{}, s.fail(errs.InvalidArchive, at, "%d %s elements cannot fit in the %d bytes left", n, v.Type, s.size-s.pos)
	}
	if err := s.need(n*w, "array"); err != nil {
		return Value{}, err
	}
	v.Raw = make([]byte, n*w)
	if err := s.read(v.Raw, v.Type.String()+" value"); err != nil {
		return Value{}, err
	}
	if err := checkValue(v); err != nil {
		return Value{}, s.relocate(err, at, "")
	}
	return v, nil
}

// alignmentOf returns the data alignment the key/values give:
// general.alignment (a u32, a non-zero power of two) or the default.
func alignmentOf(kvs []KV) (int64, error) {
	for _, kv := range kvs {
		if kv.Key != KeyAlignment {
			continue
		}
		a, ok := uintOf(kv.Value, TypeUint32)
		if !ok {
			return 0, errs.New(errs.SchemaError, pkg, "%s must be a u32, it is %s", KeyAlignment, describeType(kv.Value))
		}
		if a == 0 || a&(a-1) != 0 {
			return 0, errs.New(errs.SchemaError, pkg, "%s %d is not a power of two", KeyAlignment, a)
		}
		return int64(a), nil
	}
	return DefaultAlignment, nil
}

func describeType(v Value) string {
	if v.Array {
		return "arr[" + v.Type.String() + "]"
	}
	return v.Type.String()
}

func (h *header) readInfos(s *scanner, n int) error {
	h.tensors = make([]tensorInfo, 0, n)
	seen := make(map[string]bool, n)
	for range n {
		t := tensorInfo{at: s.pos}
		var err error
		if t.name, err = s.str("tensor name"); err != nil {
			return err
		}
		if err := CheckName(t.name); err != nil {
			return s.relocate(err, t.at, "")
		}
		if seen[t.name] {
			return s.fail(errs.SchemaError, t.at, "tensor %q appears twice", t.name)
		}
		seen[t.name] = true
		nDims, err := s.u32("n_dims")
		if err != nil {
			return err
		}
		if nDims > MaxDims {
			return s.fail(errs.SchemaError, t.at, "tensor %q has %d dimensions, ggml has at most %d", t.name, nDims, MaxDims)
		}
		t.ne = make([]int64, nDims)
		for j := range t.ne {
			d, err := s.u64("dimension")
			if err != nil {
				return err
			}
			if d > math.MaxInt64 {
				return s.fail(errs.SchemaError, t.at, "tensor %q: dimension %d is negative (%d)", t.name, j, int64(d))
			}
			t.ne[j] = int64(d)
		}
		typ, err := s.u32("type")
		if err != nil {
			return err
		}
		info, err := lookupType(TypeID(typ))
		if err != nil {
			return s.relocate(err, t.at, "tensor "+strconv.Quote(t.name))
		}
		t.dtype = info.Name
		if t.size, err = nbytes(info, t.ne); err != nil {
			return s.relocate(err, t.at, "tensor "+strconv.Quote(t.name))
		}
		off, err := s.u64("offset")
		if err != nil {
			return err
		}
		if off > math.MaxInt64 {
			return s.fail(errs.InvalidArchive, t.at, "tensor %q: offset %d passes any file", t.name, off)
		}
		t.offset = int64(off)
		h.tensors = append(h.tensors, t)
		// The info, the name in seen, and the layout tensor and extents.
		if err := s.charge(3*int64(len(t.name)) + 16*int64(len(t.ne)) + 320); err != nil {
			return err
		}
	}
	return nil
}

// CheckName refuses tensor names GGUF cannot hold or a manifest cannot keep
// exactly: empty, longer than MaxNameLength bytes, not UTF-8, or with a NUL
// (ggml would cut the name there).
func CheckName(name string) error {
	switch {
	case name == "":
		return errs.New(errs.SchemaError, pkg, "empty tensor name")
	case len(name) > MaxNameLength:
		return errs.New(errs.SchemaError, pkg, "tensor name %q is %d bytes; GGUF names are at most %d", name, len(name), MaxNameLength)
	case !utf8.ValidString(name) || strings.ContainsRune(name, 0):
		return errs.New(errs.SchemaError, pkg, "tensor name %q is not UTF-8 text", name)
	}
	return nil
}

// align rounds n up to a multiple of a (a power of two).
func align(n, a int64) int64 { return (n + a - 1) &^ (a - 1) }

// msgOf is the message of a classified error without its prefixes, for an
// error that is reported again with more context.
func msgOf(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Msg
	}
	return err.Error()
}

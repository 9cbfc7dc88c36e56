package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/strictjson"
	"github.com/mstore/mstore/internal/prefault"
)

const pkg = "safetensors"

// MaxHeaderSize is the largest header the reference reader accepts
// (MAX_HEADER_SIZE in safetensors/src/tensor.rs). A larger one is
// size_limit_exceeded, checked before anything is allocated for it.
const MaxHeaderSize = 100_000_000

// lengthPrefix is the size of the little-endian header length.
const lengthPrefix = 8

// metadataKey is the header key that holds free-form string metadata.
const metadataKey = "__metadata__"

// header is one file's parsed header.
type header struct {
	frameSize int64             // 8 + N: the length prefix and the header
	meta      map[string]string // __metadata__, nil when absent or null
	tensors   []entry           // in data-offset order
}

// entry is one tensor of a header. begin and end are relative to the data
// section, which starts at frameSize.
type entry struct {
	name       string
	dtype      string
	shape      []int64
	begin, end int64
	at         int64 // file offset of the entry's key, for messages
}

// readHeader reads and checks the header of the file at path. Only the
// length prefix and the header are read; tensor data is never touched.
func readHeader(dir formats.Dir, path string, lim formats.Limits) (*header, int64, error) {
	f, err := dir.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	size := f.Size()
	if size < lengthPrefix {
		return nil, size, errs.At(errs.InvalidArchive, pkg, path, 0, "file of %d bytes is shorter than the 8-byte header length", size)
	}
	var prefix [lengthPrefix]byte
	if err := readFull(f, prefix[:], 0, path); err != nil {
		return nil, size, err
	}
	n := binary.LittleEndian.Uint64(prefix[:])
	if n > MaxHeaderSize {
		return nil, size, errs.At(errs.SizeLimitExceeded, pkg, path, 0, "header length %d is over the %d-byte limit", n, MaxHeaderSize)
	}
	if int64(n) > size-lengthPrefix {
		return nil, size, errs.At(errs.InvalidArchive, pkg, path, 0, "header length %d passes the end of the %d-byte file", n, size)
	}
	hdr := make([]byte, n) // bounded by MaxHeaderSize and the file size above
	prefault.Slice(hdr)
	if err := readFull(f, hdr, lengthPrefix, path); err != nil {
		return nil, size, err
	}
	h, err := parseHeader(path, hdr, size-lengthPrefix-int64(n), lim.Budget(pkg, path, int64(n)))
	return h, size, err
}

func readFull(f io.ReaderAt, b []byte, off int64, path string) error {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return nil // io.ReaderAt may report io.EOF with the last bytes
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// The file shrank under us, or its Size lied: it is truncated.
		return errs.At(errs.InvalidArchive, pkg, path, off, "file ends inside the header")
	}
	// A machine I/O failure has no class: it says nothing about the input.
	return fmt.Errorf("%s: read %s: %w", pkg, path, err)
}

// parseHeader checks the header JSON hdr of a file whose data section
// (everything after the header) is dataLen bytes long. A large header is
// read in parts at once when it can be (splitter.parse); otherwise, and
// whenever that fails, in one.
func parseHeader(path string, hdr []byte, dataLen int64, budget *formats.Budget) (*header, error) {
	return split.header(path, hdr, dataLen, budget)
}

// parseSerial reads the header in one part: its result and its error are
// the reference for every other way of reading it.
func parseSerial(path string, hdr []byte, dataLen int64, budget *formats.Budget) (*header, error) {
	r, err := strictjson.New(hdr, lengthPrefix, pkg, path)
	if err != nil {
		return nil, err
	}
	if c := r.Peek(); c != '{' {
		return nil, r.Fail(errs.SchemaError, "header is not a JSON object")
	}
	p := newPart(r, partGuess(hdr), dataLen, nil, admits(room(budget)), budget.Charge)
	if err := r.Members(p.member, true, true); err != nil {
		return nil, err
	}
	if err := r.End(); err != nil {
		return nil, err
	}
	h := &header{frameSize: lengthPrefix + int64(len(hdr)), meta: p.meta, tensors: p.tensors}
	return h, checkOffsets(path, h, dataLen)
}

// part reads the top-level members of one part of a header (all of it, or
// one of the parts of splitter.parse).
type part struct {
	r       *strictjson.Reader
	er      *entryReader
	seen    map[string]struct{} // the keys read, to refuse a duplicate
	tensors []entry
	meta    map[string]string
	charge  func(int64) error // the parse budget's
}

// newPart makes a part reading the reader's bytes, whose tensors (at most
// guess of them, as partGuess tells) are appended to tensors, or to a
// slice of its own when tensors is nil. The budget admits at most admit
// of them.
func newPart(r *strictjson.Reader, guess int, dataLen int64, tensors []entry, admit int, charge func(int64) error) *part {
	r.Intern = interned
	if tensors == nil {
		tensors = make([]entry, 0, guess)
	}
	// As many entries as the budget admits are populated (each charges
	// entryCost at least), so that a parse it refuses early has no more
	// of them resident than it wrote. In splitter.parse each part
	// populates its own region, at once.
	prefault.Slice(tensors[:0:min(cap(tensors), admit)])
	return &part{
		r:       r,
		er:      &entryReader{r: r, dataLen: dataLen, shapes: make([]int64, 0, 2*guess)},
		seen:    make(map[string]struct{}, guess+1),
		tensors: tensors,
		charge:  charge,
	}
}

// partGuess is how many tensor entries b holds, at most, so that nothing
// grows while a header of 100,000 tensors is read. Each entry has two
// arrays (shape and data_offsets), and a count of one byte is vector code
// (0.5 ms for 10 MB; a count of "data_offsets" took 11). At most one
// entry per minEntry bytes, however many '[' a hostile header has.
func partGuess(b []byte) int {
	return min(bytes.Count(b, []byte{'['})/2, len(b)/minEntry)
}

// member reads one top-level member: __metadata__ or a tensor.
func (p *part) member(key string, keyAt int64) error {
	// One map operation, not a lookup then a store.
	n := len(p.seen)
	if p.seen[key] = struct{}{}; len(p.seen) == n {
		return p.r.FailAt(errs.SchemaError, keyAt, "duplicate key %q", key)
	}
	if key == metadataKey {
		meta, err := readMetadata(p.r, p.charge)
		p.meta = meta
		return err
	}
	e, err := p.er.read(key, keyAt)
	p.tensors = append(p.tensors, e)
	if err != nil {
		return err
	}
	// The entry, its name (also in seen) and what the layout and the
	// manifest keep of it.
	return p.charge(3*int64(len(key)) + int64(len(e.dtype)) + 8*int64(len(e.shape)) + entryCost)
}

// minEntry is the length of the shortest tensor entry and its comma:
// "a":{"dtype":"U8","shape":[],"data_offsets":[0,0]},
const minEntry = 50

// entryCost is what a tensor entry costs beyond its strings: the entry,
// its map slot, its Layout tensor and extent.
const entryCost = 256

// readMetadata reads __metadata__: a string→string map, or null.
func readMetadata(r *strictjson.Reader, charge func(int64) error) (map[string]string, error) {
	if r.Null() {
		return nil, nil
	}
	if r.Peek() != '{' {
		return nil, r.Fail(errs.SchemaError, "%s must be an object of strings or null", metadataKey)
	}
	meta := map[string]string{}
	err := r.Object(func(key string, keyAt int64) error {
		if _, dup := meta[key]; dup {
			return r.FailAt(errs.SchemaError, keyAt, "duplicate %s key %q", metadataKey, key)
		}
		if r.Peek() != '"' {
			return r.Fail(errs.SchemaError, "%s value of %q must be a string", metadataKey, key)
		}
		v, err := r.Str()
		meta[key] = v
		if err != nil {
			return err
		}
		return charge(2*int64(len(key)+len(v)) + 64) // the map, then the manifest's Meta
	})
	return meta, err
}

// entryReader reads tensor entries. Its methods are the callbacks of the
// JSON reader, made once per header rather than as closures per entry,
// and the shapes of all entries share one backing array: a header of
// 100,000 tensors costs a few allocations beside their names.
type entryReader struct {
	r       *strictjson.Reader
	dataLen int64
	shapes  []int64

	e    entry
	have int
	offs [3]uint64
	nOff int
}

const hasDType, hasShape, hasOffsets = 1, 2, 4

// read reads one tensor's {"dtype", "shape", "data_offsets"} and checks
// it against itself and the data section.
func (er *entryReader) read(name string, at int64) (entry, error) {
	r := er.r
	er.e, er.have = entry{name: name, at: at}, 0
	if r.Peek() != '{' {
		return er.e, r.Fail(errs.SchemaError, "tensor %q: entry must be an object", name)
	}
	if err := r.Object(er.member); err != nil {
		return er.e, err
	}
	e := er.e
	if er.have != hasDType|hasShape|hasOffsets {
		return e, r.FailAt(errs.SchemaError, at, "tensor %q: entry lacks dtype, shape or data_offsets", name)
	}
	size, err := TensorSize(e.dtype, e.shape)
	if err != nil {
		return e, locate(err, r.Path(), at, name)
	}
	if e.end-e.begin != size {
		return e, r.FailAt(errs.SchemaError, at, "tensor %q: data_offsets [%d,%d] hold %d bytes, %s%v needs %d",
			name, e.begin, e.end, e.end-e.begin, e.dtype, e.shape, size)
	}
	return e, nil
}

// member reads one key of an entry.
func (er *entryReader) member(key string, keyAt int64) error {
	r, name := er.r, er.e.name
	var flag int
	switch key {
	case "dtype":
		flag = hasDType
	case "shape":
		flag = hasShape
	case "data_offsets":
		flag = hasOffsets
	default:
		return r.FailAt(errs.SchemaError, keyAt, "tensor %q: unknown key %q", name, key)
	}
	if er.have&flag != 0 {
		return r.FailAt(errs.SchemaError, keyAt, "tensor %q: duplicate key %q", name, key)
	}
	er.have |= flag
	switch flag {
	case hasDType:
		if r.Peek() != '"' {
			return r.Fail(errs.SchemaError, "tensor %q: dtype must be a string", name)
		}
		var err error
		er.e.dtype, err = r.Str()
		return err
	case hasShape:
		start := len(er.shapes)
		err := r.Array(er.dim)
		// Full slice expression: a later append to shapes never writes
		// into this entry's shape. A scalar's shape is [], never nil
		// (shapes is made non-nil).
		er.e.shape = er.shapes[start:len(er.shapes):len(er.shapes)]
		return err
	default:
		return er.readOffsets()
	}
}

// dim reads one shape dimension.
func (er *entryReader) dim() error {
	d, err := er.r.Uint("shape dimension")
	if err == nil && d > math.MaxInt64 {
		err = er.r.Fail(errs.SchemaError, "tensor %q: shape dimension %d is out of range", er.e.name, d)
	}
	er.shapes = append(er.shapes, int64(d))
	return err
}

// offset reads one of data_offsets.
func (er *entryReader) offset() error {
	v, err := er.r.Uint("data offset")
	if er.nOff == len(er.offs) {
		return er.r.Fail(errs.SchemaError, "tensor %q: data_offsets must be [begin, end]", er.e.name)
	}
	er.offs[er.nOff] = v
	er.nOff++
	if er.nOff > 2 {
		return er.r.Fail(errs.SchemaError, "tensor %q: data_offsets must be [begin, end]", er.e.name)
	}
	return err
}

// readOffsets reads data_offsets [begin, end], which must lie in the data
// section: a range past its end is a broken (often truncated) file.
func (er *entryReader) readOffsets() error {
	r, e, dataLen := er.r, &er.e, er.dataLen
	er.nOff = 0
	if err := r.Array(er.offset); err != nil {
		return err
	}
	if er.nOff != 2 {
		return r.Fail(errs.SchemaError, "tensor %q: data_offsets must be [begin, end]", e.name)
	}
	offs := er.offs
	if offs[0] > offs[1] {
		return r.Fail(errs.InvalidArchive, "tensor %q: data_offsets [%d,%d] end before they begin", e.name, offs[0], offs[1])
	}
	if offs[1] > uint64(dataLen) {
		return r.Fail(errs.InvalidArchive, "tensor %q: data_offsets [%d,%d] pass the end of the %d-byte data section",
			e.name, offs[0], offs[1], dataLen)
	}
	e.begin, e.end = int64(offs[0]), int64(offs[1])
	return nil
}

// checkOffsets sorts the tensors by data offset and checks that they tile
// the data section exactly: from 0, no holes, no overlaps, nothing after.
func checkOffsets(path string, h *header, dataLen int64) error {
	// Zero-size tensors may share an offset; the name makes the order total.
	sort.Slice(h.tensors, func(i, j int) bool {
		a, b := h.tensors[i], h.tensors[j]
		if a.begin != b.begin {
			return a.begin < b.begin
		}
		if a.end != b.end {
			return a.end < b.end
		}
		return a.name < b.name
	})
	var next int64
	for _, e := range h.tensors {
		switch {
		case e.begin > next:
			return errs.At(errs.InvalidArchive, pkg, path, e.at, "tensor %q: %d unused bytes before its data at %d", e.name, e.begin-next, e.begin)
		case e.begin < next:
			return errs.At(errs.InvalidArchive, pkg, path, e.at, "tensor %q: data [%d,%d] overlaps the tensor before it, which ends at %d", e.name, e.begin, e.end, next)
		}
		next = e.end
	}
	if next != dataLen {
		return errs.At(errs.InvalidArchive, pkg, path, h.frameSize+next, "%d bytes after the last tensor's data", dataLen-next)
	}
	return nil
}

// locate gives a classified error without a place the file and offset.
func locate(err error, path string, at int64, name string) error {
	var e *errs.Error
	if errors.As(err, &e) && e.Path == "" {
		c := *e
		c.Path, c.Offset, c.Msg = path, at, fmt.Sprintf("tensor %q: %s", name, e.Msg)
		return &c
	}
	return err
}

// interned returns b as a string, without allocating, for the keys every
// tensor entry repeats and the dtypes (the switch on string(b) does not
// copy b): the reader's Intern.
func interned(b []byte) (string, bool) {
	switch string(b) {
	case "dtype":
		return "dtype", true
	case "shape":
		return "shape", true
	case "data_offsets":
		return "data_offsets", true
	case "F32":
		return "F32", true
	case "F16":
		return "F16", true
	case "BF16":
		return "BF16", true
	case "F64":
		return "F64", true
	case "I64":
		return "I64", true
	case "I32":
		return "I32", true
	case "I8":
		return "I8", true
	case "U8":
		return "U8", true
	case "BOOL":
		return "BOOL", true
	}
	return "", false
}

// room is what budget still admits (all, without a budget).
func room(budget *formats.Budget) int64 {
	if budget == nil {
		return math.MaxInt64
	}
	return budget.Limit() - budget.Used()
}

// admits is how many tensor entries a budget's room admits at most.
func admits(room int64) int { return int(min(max(room, 0)/entryCost, math.MaxInt32)) }

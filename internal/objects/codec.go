package objects

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/mstore/mstore/internal/prefault"
)

// The canonical encoding of a manifest is what encoding/json writes for
// Manifest (SetEscapeHTML(false), no trailing newline). A manifest of
// 100,000 tensors takes encoding/json a second each way, through
// reflection, so both directions are written out here:
//
//   - appendManifest writes the same bytes as encoding/json would; a string
//     it cannot be sure of (anything but plain printable ASCII) is encoded
//     by encoding/json itself.
//   - decodeCanonical reads only that exact form, and its result is
//     accepted only when encoding it again gives back the input bytes, so
//     it is by construction the manifest those bytes encode. Anything else
//     (another spelling, escapes it does not know, a damaged manifest) is
//     left to encoding/json, which then decides and reports.

// appendManifest appends the canonical encoding of m to b.
func appendManifest(b []byte, m *Manifest) []byte {
	encodeManifest(m, func(p []byte) bool { b = append(b, p...); return true })
	return b
}

// sameEncoding reports whether enc is the canonical encoding of m, without
// holding a second copy of it: each file and tensor is encoded in turn and
// compared.
func sameEncoding(m *Manifest, enc []byte) bool { return sameEncodingCut(m, enc, tensorCut{}) }

// tensorCut is where decodeCanonical cut a long list of tensors: tensor k
// begins after the comma at byte at of the encoding. Zero: no cut.
type tensorCut struct{ k, at int }

// sameEncodingCut is sameEncoding, comparing the two parts of enc on
// either side of cut at once (for 100,000 tensors, half of the 25 ms).
// Each part is compared byte for byte with its part of m's encoding, so a
// cut in any place gives the right answer.
func sameEncodingCut(m *Manifest, enc []byte, cut tensorCut) bool {
	n := len(m.Tensors)
	if cut.k <= 0 || cut.k >= n || cut.at < 0 || cut.at > len(enc) {
		return encodesAs(m, 0, n, enc)
	}
	head := make(chan bool)
	go func() { head <- encodesAs(m, 0, cut.k, enc[:cut.at]) }()
	tail := encodesAs(m, cut.k, n, enc[cut.at:])
	return <-head && tail
}

// encodesAs reports whether enc is encodeRange(m, from, to).
func encodesAs(m *Manifest, from, to int, enc []byte) bool {
	ok := encodeRange(m, from, to, func(p []byte) bool {
		if !bytes.HasPrefix(enc, p) {
			return false
		}
		enc = enc[len(p):]
		return true
	})
	return ok && len(enc) == 0
}

// encodeManifest gives the canonical encoding of m to emit, in pieces of
// about one file or tensor; it stops, false, when emit returns false.
func encodeManifest(m *Manifest, emit func([]byte) bool) bool {
	return encodeRange(m, 0, len(m.Tensors), emit)
}

// encodeRange gives emit the part of m's canonical encoding that holds
// tensors from to to: from its start when from is 0, else from the comma
// before tensor from; to its end when to is the last, else to the end of
// tensor to-1.
func encodeRange(m *Manifest, from, to int, emit func([]byte) bool) bool {
	b := make([]byte, 0, 4096)
	flush := func(p []byte) ([]byte, bool) { return p[:0], emit(p) }
	var ok bool
	if from == 0 {
		b = append(b, `{"schema":`...)
		b = strconv.AppendInt(b, int64(m.Schema), 10)
		b = append(b, `,"format":`...)
		b = appendString(b, m.Format)
		b = append(b, `,"files":`...)
		if m.Files == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '[')
			for i := range m.Files {
				if i > 0 {
					b = append(b, ',')
				}
				if b, ok = appendFile(b, &m.Files[i], flush); !ok {
					return false
				}
			}
			b = append(b, ']')
		}
		b = append(b, `,"tensors":`...)
		if m.Tensors == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '[')
		}
	}
	for i := from; i < to; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendTensor(b, &m.Tensors[i])
		if len(b) > 2048 {
			if b, ok = flush(b); !ok {
				return false
			}
		}
	}
	if to == len(m.Tensors) {
		if m.Tensors != nil {
			b = append(b, ']')
		}
		if len(m.Meta) > 0 {
			b = appendMeta(append(b, `,"meta":`...), m.Meta)
		}
		b = append(b, '}')
	}
	_, ok = flush(b)
	return ok
}

// appendMeta appends a metadata map as encoding/json writes it: keys sorted.
func appendMeta(b []byte, meta map[string]string) []byte {
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendString(b, meta[k])
	}
	return append(b, '}')
}

// appendFile appends f; a long list of extents is given to flush as it
// grows (false: flush refused it).
func appendFile(b []byte, f *File, flush func([]byte) ([]byte, bool)) ([]byte, bool) {
	b = append(b, `{"path":`...)
	b = appendString(b, f.Path)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, f.Size, 10)
	b = append(b, `,"digest":`...)
	b = appendDigest(b, f.Digest)
	b = append(b, `,"role":`...)
	b = appendString(b, string(f.Role))
	if len(f.Meta) > 0 {
		b = appendMeta(append(b, `,"meta":`...), f.Meta)
	}
	b = append(b, `,"extents":`...)
	if f.Extents == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range f.Extents {
			if i > 0 {
				b = append(b, ',')
			}
			e := &f.Extents[i]
			b = append(b, `{"kind":`...)
			b = appendString(b, string(e.Kind))
			b = append(b, `,"size":`...)
			b = strconv.AppendInt(b, e.Size, 10)
			if e.Tensor != 0 {
				b = append(b, `,"tensor":`...)
				b = strconv.AppendInt(b, int64(e.Tensor), 10)
			}
			if e.Data != nil {
				b = append(b, `,"data":{"digest":`...)
				b = appendDigest(b, e.Data.Digest)
				b = append(b, `,"chunks":`...)
				b = appendDigests(b, e.Data.Chunks)
				b = append(b, '}')
			}
			b = append(b, '}')
			if len(b) > 2048 {
				var ok bool
				if b, ok = flush(b); !ok {
					return nil, false
				}
			}
		}
		b = append(b, ']')
	}
	return append(b, '}'), true
}

func appendTensor(b []byte, t *Tensor) []byte {
	b = append(b, `{"name":`...)
	b = appendString(b, t.Name)
	b = append(b, `,"dtype":`...)
	b = appendString(b, t.DType)
	b = append(b, `,"shape":`...)
	if t.Shape == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, d := range t.Shape {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, d, 10)
		}
		b = append(b, ']')
	}
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, t.Size, 10)
	b = append(b, `,"digest":`...)
	b = appendDigest(b, t.Digest)
	b = append(b, `,"chunks":`...)
	b = appendDigests(b, t.Chunks)
	return append(b, '}')
}

func appendDigest(b []byte, d Digest) []byte {
	b = append(b, '"')
	b = hex.AppendEncode(b, d[:])
	return append(b, '"')
}

func appendDigests(b []byte, ds []Digest) []byte {
	if ds == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, d := range ds {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendDigest(b, d)
	}
	return append(b, ']')
}

// plainASCII reports whether encoding/json writes s between quotes as it
// is: printable ASCII without '"' or '\'.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func appendString(b []byte, s string) []byte {
	if plainASCII(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

// decodeCanonical reads the canonical encoding of a manifest; ok is false
// for any other input (decodeManifest then uses encoding/json).
func decodeCanonical(b []byte) (m *Manifest, ok bool) {
	m, _, ok = decodeCanonicalCut(b)
	return m, ok
}

// decodeCanonicalCut is decodeCanonical, and where it cut the tensors.
func decodeCanonicalCut(b []byte) (m *Manifest, cut tensorCut, ok bool) {
	d := canonReader{b: b}
	m, ok = d.manifest()
	return m, d.cut, ok
}

func (d *canonReader) manifest() (m *Manifest, ok bool) {
	m = &Manifest{}
	if !d.lit(`{"schema":`) {
		return nil, false
	}
	schema, ok := d.int()
	if !ok || !d.lit(`,"format":`) {
		return nil, false
	}
	m.Schema = int(schema)
	if m.Format, ok = d.str(); !ok || !d.lit(`,"files":`) {
		return nil, false
	}
	// The files' extents are cut from one arena too, bounded like the
	// tensors below (a quote inside a string is escaped, so each extent
	// is one match): a file of 100,000 tensors grew its list by append.
	if n := min(bytes.Count(d.b[d.i:], []byte(`{"kind":`)), (len(d.b)-d.i)/minExtentEncoding); n > 0 {
		d.extents = make([]Extent, 0, n)
		prefault.Slice(d.extents)
	}
	if !d.list(func() bool {
		f, ok := d.file()
		m.Files = append(m.Files, f)
		return ok
	}, func() { m.Files = []File{} }) {
		return nil, false
	}
	if !d.lit(`,"tensors":`) {
		return nil, false
	}
	if m.Tensors, ok = d.tensors(); !ok {
		return nil, false
	}
	if d.lit(`,"meta":`) {
		if m.Meta, ok = d.meta(); !ok {
			return nil, false
		}
	}
	if !d.lit(`}`) || d.i != len(d.b) {
		return nil, false
	}
	return m, true
}

// tensors reads the manifest's list of tensors. A long list is read in two
// halves at once, split at a tensor's start near its middle: for 100,000
// tensors, most of a checkout's reading of its manifest. (A half that
// does not read as tensors makes the whole not canonical, as it would
// read in one piece; the caller's sameEncoding then checks the result
// against every byte.)
func (d *canonReader) tensors() ([]Tensor, bool) {
	if d.null() {
		return nil, true
	}
	// Room for the tensors, bounded by the shortest a tensor's encoding
	// can be, so that no input makes this allocate more than it holds.
	n := min(bytes.Count(d.b[d.i:], []byte(`{"name":`)), (len(d.b)-d.i)/minTensorEncoding)
	if !d.lit("[") {
		return nil, false
	}
	if d.lit("]") {
		return []Tensor{}, true
	}
	out := make([]Tensor, 0, n)
	prefault.Slice(out) // 12 MB for 100,000 tensors, filled by both halves at once (prefault)
	second := -1        // where the second half's first tensor begins
	if n >= parallelTensors {
		from := d.i + (len(d.b)-d.i)/2
		if at := bytes.Index(d.b[from:], []byte(`},{"name":`)); at >= 0 {
			second = from + at + len(`},`)
		}
	}
	if second < 0 {
		return d.tensorRun(out, len(d.b))
	}
	k := bytes.Count(d.b[d.i:second], []byte(`{"name":`))
	first := canonReader{b: d.b[:second], i: d.i}
	rest := canonReader{b: d.b, i: second}
	var head []Tensor
	var headOK bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The first half ends where the second begins: its last tensor is
		// followed by the comma before it.
		head, headOK = first.tensorRun(out[:0:k], second-1)
	}()
	tail, ok := rest.tensorRun(out[k:k], len(d.b))
	<-done
	if !ok || !headOK || len(head) != k || first.i != second {
		return nil, false
	}
	d.i, d.cut = rest.i, tensorCut{k: k, at: second - 1}
	if len(tail) > cap(out)-k { // grown past its room: no longer after head
		return append(head[:k:k], tail...), true
	}
	return out[:k+len(tail)], true
}

// parallelTensors is the length of a list of tensors from which tensors
// reads it in two halves (a variable: the tests and the fuzzer split short
// lists too).
var parallelTensors = 4096

// tensorRun appends to out the tensors of a list whose '[' was read, up
// to its ']', or up to the comma at stop (a half of it, tensors). It
// reads into out's room first: tensors gives each half its part of one
// array.
func (d *canonReader) tensorRun(out []Tensor, stop int) ([]Tensor, bool) {
	if n := cap(out) - len(out); n > 0 {
		d.digests = make([]Digest, 0, n) // most tensors are one chunk
		d.ints = make([]int64, 0, 2*n)
	}
	for {
		t, ok := d.tensor()
		if !ok {
			return nil, false
		}
		out = append(out, t)
		if d.i == stop && d.lit(",") {
			return out, true
		}
		if d.lit("]") {
			return out, stop == len(d.b)
		}
		if !d.lit(",") {
			return nil, false
		}
	}
}

// minExtentEncoding is the length of the shortest encoded extent:
// {"kind":"zeros","size":0}
const minExtentEncoding = 25

// minTensorEncoding is the length of the shortest encoded tensor:
// {"name":"","dtype":"","shape":null,"size":0,"digest":"<64 hex>","chunks":null}
const minTensorEncoding = 134

type canonReader struct {
	b []byte
	i int
	// digests is an arena the chunk lists of tensors are cut from: one
	// allocation for all of them rather than one per tensor.
	digests []Digest
	ints    []int64
	extents []Extent
	cut     tensorCut         // where tensors cut the list
	dtypes  map[string]string // interned: a model has a few dtypes
}

func (d *canonReader) lit(s string) bool {
	if !bytes.HasPrefix(d.b[d.i:], []byte(s)) {
		return false
	}
	d.i += len(s)
	return true
}

// null reads "null" if it is next.
func (d *canonReader) null() bool { return d.lit("null") }

// list reads null, [] or [item,item...]; empty is called for [].
func (d *canonReader) list(item func() bool, empty func()) bool {
	if d.null() {
		return true
	}
	if !d.lit("[") {
		return false
	}
	if d.lit("]") {
		empty()
		return true
	}
	for {
		if !item() {
			return false
		}
		if d.lit("]") {
			return true
		}
		if !d.lit(",") {
			return false
		}
	}
}

// int reads what strconv.ParseInt takes of an optional minus and digits.
// Up to 18 digits (every size and offset) cannot overflow and are summed
// here; ParseInt, whose argument escapes, took a string allocated for
// each of a large manifest's 300,000 numbers.
func (d *canonReader) int() (int64, bool) {
	j := d.i
	neg := j < len(d.b) && d.b[j] == '-'
	if neg {
		j++
	}
	start := j
	var v int64
	for j < len(d.b) && d.b[j] >= '0' && d.b[j] <= '9' {
		v = v*10 + int64(d.b[j]-'0') // wraps past 18 digits; not used then
		j++
	}
	switch n := j - start; {
	case n == 0:
		return 0, false
	case n > 18:
		p, err := strconv.ParseInt(string(d.b[d.i:j]), 10, 64)
		if err != nil {
			return 0, false
		}
		v, neg = p, false
	}
	if neg {
		v = -v
	}
	d.i = j
	return v, true
}

// rawStr reads a string of plain ASCII (plainASCII) and returns its bytes.
func (d *canonReader) rawStr() ([]byte, bool) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return nil, false
	}
	j := d.i + 1
	for j < len(d.b) && d.b[j] != '"' {
		if c := d.b[j]; c < 0x20 || c == '\\' {
			return nil, false
		}
		j++
	}
	if j == len(d.b) {
		return nil, false
	}
	s := d.b[d.i+1 : j]
	d.i = j + 1
	return s, true
}

// str reads a string; one with escapes is decoded by encoding/json.
func (d *canonReader) str() (string, bool) {
	start := d.i
	if s, ok := d.rawStr(); ok {
		return string(s), true
	}
	// Find the closing quote, skipping escaped characters.
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return "", false
	}
	j := start + 1
	for j < len(d.b) && d.b[j] != '"' {
		if d.b[j] == '\\' {
			j++
		}
		j++
	}
	if j >= len(d.b) {
		return "", false
	}
	var s string
	if err := json.Unmarshal(d.b[start:j+1], &s); err != nil {
		return "", false
	}
	d.i = j + 1
	return s, true
}

func (d *canonReader) dtype() (string, bool) {
	raw, ok := d.rawStr()
	if !ok {
		return d.str()
	}
	if s, ok := d.dtypes[string(raw)]; ok {
		return s, true
	}
	if d.dtypes == nil {
		d.dtypes = map[string]string{}
	}
	s := string(raw)
	d.dtypes[s] = s
	return s, true
}

func (d *canonReader) digest() (Digest, bool) {
	var out Digest
	if len(d.b)-d.i < 66 || d.b[d.i] != '"' || d.b[d.i+65] != '"' {
		return out, false
	}
	if !decodeHex(&out, d.b[d.i+1:d.i+65]) {
		return out, false
	}
	d.i += 66
	return out, true
}

func (d *canonReader) digestList() ([]Digest, bool) {
	if d.null() {
		return nil, true
	}
	start := len(d.digests)
	ok := d.list(func() bool {
		x, ok := d.digest()
		d.digests = append(d.digests, x)
		return ok
	}, func() {})
	if !ok {
		return nil, false
	}
	// Cut from the arena, capped so that an append copies.
	out := d.digests[start:len(d.digests):len(d.digests)]
	if out == nil {
		out = []Digest{}
	}
	return out, true
}

func (d *canonReader) file() (File, bool) {
	var f File
	var ok bool
	if !d.lit(`{"path":`) {
		return f, false
	}
	if f.Path, ok = d.str(); !ok || !d.lit(`,"size":`) {
		return f, false
	}
	if f.Size, ok = d.int(); !ok || !d.lit(`,"digest":`) {
		return f, false
	}
	if f.Digest, ok = d.digest(); !ok || !d.lit(`,"role":`) {
		return f, false
	}
	role, ok := d.str()
	if !ok {
		return f, false
	}
	f.Role = FileRole(role)
	if d.lit(`,"meta":`) {
		if f.Meta, ok = d.meta(); !ok {
			return f, false
		}
	}
	if !d.lit(`,"extents":`) {
		return f, false
	}
	start := len(d.extents)
	if !d.list(func() bool {
		e, ok := d.extent()
		d.extents = append(d.extents, e)
		return ok
	}, func() { f.Extents = []Extent{} }) {
		return f, false
	}
	if n := len(d.extents); n > start {
		f.Extents = d.extents[start:n:n] // capped: an append copies
	}
	return f, d.lit("}")
}

// meta reads a non-empty metadata map (the canonical form omits an empty one).
func (d *canonReader) meta() (map[string]string, bool) {
	if !d.lit("{") {
		return nil, false
	}
	meta := map[string]string{}
	for {
		k, ok := d.str()
		if !ok || !d.lit(":") {
			return nil, false
		}
		if meta[k], ok = d.str(); !ok {
			return nil, false
		}
		if d.lit("}") {
			return meta, true
		}
		if !d.lit(",") {
			return nil, false
		}
	}
}

func (d *canonReader) extent() (Extent, bool) {
	var e Extent
	if !d.lit(`{"kind":"`) {
		return e, false
	}
	switch {
	case d.lit(`tensor"`):
		e.Kind = ExtentTensor
	case d.lit(`frame"`):
		e.Kind = ExtentFrame
	case d.lit(`zeros"`):
		e.Kind = ExtentZeros
	default:
		return e, false
	}
	var ok bool
	if !d.lit(`,"size":`) {
		return e, false
	}
	if e.Size, ok = d.int(); !ok {
		return e, false
	}
	if d.lit(`,"tensor":`) {
		t, ok := d.int()
		if !ok || int64(int(t)) != t {
			return e, false
		}
		e.Tensor = int(t)
	}
	if d.lit(`,"data":{"digest":`) {
		e.Data = &Data{}
		if e.Data.Digest, ok = d.digest(); !ok || !d.lit(`,"chunks":`) {
			return e, false
		}
		if e.Data.Chunks, ok = d.digestList(); !ok || !d.lit("}") {
			return e, false
		}
	}
	return e, d.lit("}")
}

// shape reads a tensor's shape; its dimensions are cut from an arena.
func (d *canonReader) shape() ([]int64, bool) {
	if d.null() {
		return nil, true
	}
	start := len(d.ints)
	if !d.list(func() bool {
		v, ok := d.int()
		d.ints = append(d.ints, v)
		return ok
	}, func() {}) {
		return nil, false
	}
	out := d.ints[start:len(d.ints):len(d.ints)]
	if out == nil {
		out = []int64{}
	}
	return out, true
}

func (d *canonReader) tensor() (Tensor, bool) {
	var t Tensor
	var ok bool
	if !d.lit(`{"name":`) {
		return t, false
	}
	if t.Name, ok = d.str(); !ok || !d.lit(`,"dtype":`) {
		return t, false
	}
	if t.DType, ok = d.dtype(); !ok || !d.lit(`,"shape":`) {
		return t, false
	}
	if t.Shape, ok = d.shape(); !ok || !d.lit(`,"size":`) {
		return t, false
	}
	if t.Size, ok = d.int(); !ok || !d.lit(`,"digest":`) {
		return t, false
	}
	if t.Digest, ok = d.digest(); !ok || !d.lit(`,"chunks":`) {
		return t, false
	}
	if t.Chunks, ok = d.digestList(); !ok {
		return t, false
	}
	return t, d.lit("}")
}

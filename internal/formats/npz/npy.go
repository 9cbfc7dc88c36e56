package npz

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mstore/mstore/internal/errs"
)

const pkg = "npz"

// magic starts every .npy file.
const magic = "\x93NUMPY"

// maxHeader bounds an .npy header: numpy.load refuses more than 10,000
// bytes unless told otherwise; a real one is under 200.
const maxHeader = 1 << 20

// array is a parsed .npy header.
type array struct {
	version  byte
	descr    string // numpy's dtype string, "<f4"
	dtype    string // mstore's dtype: "F32", or "npy:" + descr
	fortran  bool
	shape    []int64
	header   int64 // bytes before the data
	dataSize int64
}

// The dtypes mstore names, by numpy descr: little-endian (or, for one
// byte, without an order), as numpy writes them on every machine mstore
// runs on.
var namedDTypes = map[string]string{
	"|b1": "BOOL", "|i1": "I8", "|u1": "U8", "<i2": "I16", "<u2": "U16", "<i4": "I32", "<u4": "U32",
	"<i8": "I64", "<u8": "U64", "<f2": "F16", "<f4": "F32", "<f8": "F64", "<c8": "C64", "<c16": "C128",
}

// descrOf is the descr numpy writes for an mstore dtype.
func descrOf(dtype string) (string, bool) {
	if d, ok := strings.CutPrefix(dtype, "npy:"); ok {
		_, err := itemSize(d)
		return d, err == nil
	}
	for d, n := range namedDTypes {
		if n == dtype {
			return d, true
		}
	}
	return "", false
}

// simpleDescr splits a dtype without fields into its kind, size and
// datetime unit (brackets included, or ""), as the regular expression
// ^([<>|=])([biufcmMUSV])([0-9]{1,9})(\[[0-9]*[a-zA-Z]{1,3}\])?$ would
// (FuzzSimpleDescr holds it to that): by hand, as it reads the descr of
// every member of an .npz (a regular expression took 0.1 s of a checkout
// of 100,000 tensors to npz).
func simpleDescr(d string) (kind byte, size, unit string, ok bool) {
	if len(d) < 3 || strings.IndexByte("<>|=", d[0]) < 0 || strings.IndexByte("biufcmMUSV", d[1]) < 0 {
		return 0, "", "", false
	}
	i := 2
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	if i == 2 || i > 11 {
		return 0, "", "", false
	}
	size, unit = d[2:i], d[i:]
	if unit == "" {
		return d[1], size, "", true
	}
	if len(unit) < 3 || unit[0] != '[' || unit[len(unit)-1] != ']' {
		return 0, "", "", false
	}
	in := unit[1 : len(unit)-1]
	j := 0
	for j < len(in) && '0' <= in[j] && in[j] <= '9' {
		j++
	}
	letters := in[j:]
	if len(letters) < 1 || len(letters) > 3 {
		return 0, "", "", false
	}
	for k := 0; k < len(letters); k++ {
		if c := letters[k] | 0x20; c < 'a' || c > 'z' {
			return 0, "", "", false
		}
	}
	return d[1], size, unit, true
}

// itemSize is the width of one element of descr, or an error naming why
// mstore does not take it.
func itemSize(descr string) (int64, error) {
	if len(descr) >= 2 && descr[1] == 'O' {
		return 0, errs.New(errs.UnsupportedVersion, pkg, "dtype %q is an object array: its data is a pickle of Python objects, which mstore does not run (numpy.load needs allow_pickle=True for it); save numeric arrays instead", descr)
	}
	kind, digits, unit, ok := simpleDescr(descr)
	if !ok {
		return 0, errs.New(errs.UnsupportedVersion, pkg, "dtype %q is not one this build reads (fixed-size numbers, booleans, strings, bytes, datetimes; not structured dtypes)", descr)
	}
	n, _ := strconv.ParseInt(digits, 10, 64)
	if unit != "" && kind != 'm' && kind != 'M' {
		return 0, errs.New(errs.SchemaError, pkg, "dtype %q: only datetimes and timedeltas have a unit", descr)
	}
	if kind == 'U' {
		n *= 4 // UCS-4
	}
	return n, nil
}

// parseNPY reads the preamble and header at the start of b, which holds at
// least the first 12 bytes of the file (more are asked for through need).
func parseNPY(head []byte, need func(n int64) ([]byte, error), path string) (*array, error) {
	bad := func(class errs.Class, format string, args ...any) error {
		return errs.At(class, pkg, path, 0, format, args...)
	}
	if len(head) < 10 || string(head[:6]) != magic {
		return nil, bad(errs.InvalidArchive, "not an .npy array: it does not start with numpy's magic string")
	}
	a := &array{version: head[6]}
	var hlen, pre int64
	switch a.version {
	case 1:
		hlen, pre = int64(binary.LittleEndian.Uint16(head[8:])), 10
	case 2, 3:
		if len(head) < 12 {
			return nil, bad(errs.InvalidArchive, "the .npy preamble is cut short")
		}
		hlen, pre = int64(binary.LittleEndian.Uint32(head[8:])), 12
	default:
		return nil, bad(errs.UnsupportedVersion, ".npy format version %d.%d is not one this build reads (1.0, 2.0, 3.0)", head[6], head[7])
	}
	if head[7] != 0 {
		return nil, bad(errs.UnsupportedVersion, ".npy format version %d.%d is not one this build reads (1.0, 2.0, 3.0)", head[6], head[7])
	}
	if hlen > maxHeader {
		return nil, bad(errs.SizeLimitExceeded, "the .npy header is %d bytes, more than the %d this build reads", hlen, maxHeader)
	}
	b, err := need(pre + hlen)
	if err != nil {
		return nil, err
	}
	text := b[pre:]
	// v1 and v2 headers are latin-1, v3 UTF-8; only ASCII is valid syntax.
	if a.version == 3 && !utf8.Valid(text) {
		return nil, bad(errs.SchemaError, "the v3 .npy header is not UTF-8")
	}
	if len(text) == 0 || text[len(text)-1] != '\n' {
		return nil, bad(errs.SchemaError, "the .npy header does not end with a newline")
	}
	if err := a.parseDict(string(bytes.TrimRight(text, " \n"))); err != nil {
		return nil, bad(errs.ClassOf(err), "the .npy header: %v", err)
	}
	size, err := itemSize(a.descr)
	if err != nil {
		return nil, errs.At(errs.ClassOf(err), pkg, path, pre, "%v", err)
	}
	a.dtype = namedDTypes[a.descr]
	if a.dtype == "" {
		a.dtype = "npy:" + a.descr
	}
	for _, d := range a.shape {
		hi, lo := bits.Mul64(uint64(size), uint64(d))
		if hi != 0 || lo > 1<<62 {
			return nil, bad(errs.SchemaError, "the array's shape %v of %s is too large", a.shape, a.descr)
		}
		size = int64(lo)
	}
	a.header, a.dataSize = pre+hlen, size
	return a, nil
}

// parseDict parses the header's Python dict literal, as numpy writes it
// and as numpy.lib.format reads it with ast.literal_eval: exactly the keys
// descr, fortran_order and shape.
func (a *array) parseDict(s string) error {
	p := &lit{s: s}
	if !p.eat("{") {
		return errs.New(errs.SchemaError, pkg, "it is not a dict literal")
	}
	seen := map[string]bool{}
	for !p.eat("}") {
		key, ok := p.str()
		if !ok || !p.eat(":") {
			return errs.New(errs.SchemaError, pkg, "a key is not a quoted string followed by ':'")
		}
		if seen[key] {
			return errs.New(errs.SchemaError, pkg, "key %q appears twice", key)
		}
		seen[key] = true
		switch key {
		case "descr":
			if p.peek() == '[' {
				return errs.New(errs.UnsupportedVersion, pkg, "the array has a structured dtype (a list of fields), which this build does not read")
			}
			if a.descr, ok = p.str(); !ok {
				return errs.New(errs.SchemaError, pkg, "descr is not a string")
			}
		case "fortran_order":
			switch {
			case p.eat("True"):
				a.fortran = true
			case p.eat("False"):
			default:
				return errs.New(errs.SchemaError, pkg, "fortran_order is not True or False")
			}
		case "shape":
			shape, err := p.tuple()
			if err != nil {
				return err
			}
			a.shape = shape
		default:
			return errs.New(errs.SchemaError, pkg, "unexpected key %q", key)
		}
		if !p.eat(",") && p.peek() != '}' {
			return errs.New(errs.SchemaError, pkg, "entries are not separated by ','")
		}
	}
	if p.i != len(p.s) {
		return errs.New(errs.SchemaError, pkg, "bytes follow the dict")
	}
	if !seen["descr"] || !seen["fortran_order"] || !seen["shape"] {
		return errs.New(errs.SchemaError, pkg, "it lacks descr, fortran_order or shape")
	}
	return nil
}

// lit scans a Python literal.
type lit struct {
	s string
	i int
}

func (p *lit) skip() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n') {
		p.i++
	}
}

func (p *lit) peek() byte {
	p.skip()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *lit) eat(tok string) bool {
	p.skip()
	if strings.HasPrefix(p.s[p.i:], tok) {
		p.i += len(tok)
		return true
	}
	return false
}

// str reads a quoted string without escapes (numpy's keys and descrs have
// none).
func (p *lit) str() (string, bool) {
	q := p.peek()
	if q != '\'' && q != '"' {
		return "", false
	}
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 || strings.IndexByte(p.s[p.i+1:p.i+1+end], '\\') >= 0 {
		return "", false
	}
	out := p.s[p.i+1 : p.i+1+end]
	p.i += end + 2
	return out, true
}

// tuple reads a tuple of non-negative integers: (), (3,), (3, 4).
func (p *lit) tuple() ([]int64, error) {
	if !p.eat("(") {
		return nil, errs.New(errs.SchemaError, pkg, "shape is not a tuple")
	}
	shape := []int64{}
	for !p.eat(")") {
		p.skip()
		j := p.i
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
		if j == p.i || j-p.i > 19 {
			return nil, errs.New(errs.SchemaError, pkg, "shape holds something other than a non-negative integer")
		}
		n, err := strconv.ParseInt(p.s[p.i:j], 10, 64)
		if err != nil || n > 1<<62 {
			return nil, errs.New(errs.SchemaError, pkg, "shape dimension %q is out of range", p.s[p.i:j])
		}
		p.i = j
		p.eat("L") // Python 2's long suffix, which old numpy wrote
		shape = append(shape, n)
		if len(shape) > 64 {
			return nil, errs.New(errs.SchemaError, pkg, "shape has more than 64 dimensions (numpy's limit)")
		}
		if !p.eat(",") && p.peek() != ')' {
			return nil, errs.New(errs.SchemaError, pkg, "shape dimensions are not separated by ','")
		}
	}
	return shape, nil
}

// npyHeader is the preamble and header numpy.save writes for a C-order
// array: version 1.0 when the header fits in 65,535 bytes, else 2.0; the
// whole padded with spaces and a newline to a multiple of 64 bytes.
func npyHeader(descr string, shape []int64) []byte {
	// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } with
	// appends: an .npz of 100,000 tensors plans as many headers.
	dict := make([]byte, 0, 64+len(descr)+21*len(shape))
	dict = append(dict, "{'descr': '"...)
	dict = append(dict, descr...)
	dict = append(dict, "', 'fortran_order': False, 'shape': ("...)
	for i, d := range shape {
		if i > 0 {
			dict = append(dict, ", "...)
		}
		dict = strconv.AppendInt(dict, d, 10)
	}
	if len(shape) == 1 {
		dict = append(dict, ',') // (5,)
	}
	dict = append(dict, "), }"...)
	for _, v := range []struct {
		version byte
		pre     int
	}{{1, 10}, {2, 12}} {
		n := v.pre + len(dict) + 1
		n += (64 - n%64) % 64
		hlen := n - v.pre
		if v.version == 1 && hlen > 0xffff {
			continue
		}
		out := append(append(make([]byte, 0, n), magic...), v.version, 0)
		if v.version == 1 {
			out = binary.LittleEndian.AppendUint16(out, uint16(hlen))
		} else {
			out = binary.LittleEndian.AppendUint32(out, uint32(hlen))
		}
		out = append(out, dict...)
		for len(out) < n-1 {
			out = append(out, ' ')
		}
		return append(out, '\n')
	}
	panic("unreachable")
}

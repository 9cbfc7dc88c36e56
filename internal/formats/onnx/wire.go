package onnx

import (
	"encoding/binary"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/mstore/mstore/internal/errs"
)

// field is one protobuf field as found in a file: where its tag starts,
// where its value starts (after the length, for bytes) and where it ends.
type field struct {
	num    protowire.Number
	typ    protowire.Type
	at     int64 // the tag
	tagEnd int64 // the first byte after the tag
	val    int64 // the value: for bytes, the first byte of the payload
	end    int64
	v      uint64 // a varint's or a fixed field's value
}

// reader reads protobuf fields from a source, every length checked against
// the message that holds it before anything is read or allocated.
type reader struct {
	src  source
	path string
}

func (r *reader) fail(class errs.Class, at int64, format string, args ...any) error {
	return errs.At(class, pkg, r.path, at, format, args...)
}

// field reads the field whose tag is at pos, inside a message ending at end.
func (r *reader) field(pos, end int64) (field, error) {
	b, err := r.src.at(pos, int(min(end-pos, 2*binary.MaxVarintLen64)))
	if err != nil {
		return field{}, locate(err, r.path, pos)
	}
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return field{}, r.fail(errs.InvalidArchive, pos, "bad field tag: %v", protowire.ParseError(n))
	}
	f := field{num: num, typ: typ, at: pos, tagEnd: pos + int64(n), val: pos + int64(n)}
	rest := b[n:]
	switch typ {
	case protowire.VarintType:
		v, m := protowire.ConsumeVarint(rest)
		if m < 0 {
			return field{}, r.fail(errs.InvalidArchive, f.tagEnd, "field %d: bad varint: %v", num, protowire.ParseError(m))
		}
		f.v, f.end = v, f.val+int64(m)
	case protowire.Fixed32Type:
		if len(rest) < 4 {
			return field{}, r.fail(errs.InvalidArchive, f.tagEnd, "field %d: truncated fixed32", num)
		}
		f.v, f.end = uint64(binary.LittleEndian.Uint32(rest)), f.val+4
	case protowire.Fixed64Type:
		if len(rest) < 8 {
			return field{}, r.fail(errs.InvalidArchive, f.tagEnd, "field %d: truncated fixed64", num)
		}
		f.v, f.end = binary.LittleEndian.Uint64(rest), f.val+8
	case protowire.BytesType:
		l, m := protowire.ConsumeVarint(rest)
		if m < 0 {
			return field{}, r.fail(errs.InvalidArchive, f.tagEnd, "field %d: bad length: %v", num, protowire.ParseError(m))
		}
		f.val += int64(m)
		if l > uint64(end-f.val) {
			return field{}, r.fail(errs.InvalidArchive, f.tagEnd, "field %d: length %d runs past the end of its message (%d bytes left)", num, l, end-f.val)
		}
		f.end = f.val + int64(l)
	default:
		return field{}, r.fail(errs.InvalidArchive, pos, "field %d: wire type %d (groups) is not used by ONNX", num, typ)
	}
	return f, nil
}

// fields calls fn for every field of the message [start, end).
func (r *reader) fields(start, end int64, fn func(f field) error) error {
	for pos := start; pos < end; {
		f, err := r.field(pos, end)
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			return err
		}
		pos = f.end
	}
	return nil
}

// expect refuses a known field written with another wire type: a reader
// would take it for an unknown field and see another model than we do.
func (r *reader) expect(f field, typ protowire.Type, what string) error {
	if f.typ != typ {
		return r.fail(errs.SchemaError, f.at, "%s (field %d) has wire type %d, want %d", what, f.num, f.typ, typ)
	}
	return nil
}

// str reads a string field of at most maxString bytes; it must be UTF-8.
func (r *reader) str(f field, what string) (string, error) {
	b, err := r.bytes(f, what)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", r.fail(errs.SchemaError, f.val, "%s is not valid UTF-8", what)
	}
	return string(b), nil
}

// bytes reads a bytes field of at most maxString bytes.
func (r *reader) bytes(f field, what string) ([]byte, error) {
	if err := r.expect(f, protowire.BytesType, what); err != nil {
		return nil, err
	}
	n := f.end - f.val
	if n > maxString {
		return nil, r.fail(errs.SizeLimitExceeded, f.val, "%s is %d bytes, more than %d", what, n, maxString)
	}
	b, err := r.src.at(f.val, int(n))
	if err != nil {
		return nil, locate(err, r.path, f.val)
	}
	if int64(len(b)) != n {
		return nil, r.fail(errs.InvalidArchive, f.val, "%s: truncated", what)
	}
	return b, nil
}

// locate adds the file and offset to an error that lacks them.
func locate(err error, path string, at int64) error {
	if e, ok := err.(*errs.Error); ok && e.Path == "" {
		e2 := *e
		e2.Path, e2.Offset = path, at
		return &e2
	}
	return err
}

// appendTag, appendLen and appendString encode what the planner writes.
func appendBytesField(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

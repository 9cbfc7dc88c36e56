package gguf

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/mstore/mstore/internal/errs"
)

// EncodeKVs writes key/values as canonical JSON, in their order:
//
//	[{"key":"general.architecture","type":"str","value":"llama"},
//	 {"key":"tokenizer.ggml.scores","type":"arr","elem":"f32","value":[0,-1000]}, …]
//
// Types are gguf.cpp's names (u8 i8 u16 i16 u32 i32 f32 bool str arr u64
// i64 f64). Integers are decimal; floats are the shortest decimal that
// reads back to the same bits, with "inf", "-inf" and "nan" (or
// "nan:0x…" with the bits of a NaN that is not the default one) as
// strings; a string that is not UTF-8 is {"base64":"…"}. DecodeKVs reads
// it back to the same values, bit for bit.
func EncodeKVs(kvs []KV) []byte {
	var n int64
	for _, kv := range kvs {
		n += int64(len(kv.Key)) + jsonSize(kv.Value) + 64
	}
	b := make([]byte, 0, n) // an upper bound: one allocation for a byte array of millions
	b = append(b, '[')
	for i, kv := range kvs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		b = appendJSONString(b, kv.Key)
		v := kv.Value
		if v.Array {
			b = append(b, `,"type":"arr","elem":"`...)
			b = append(b, v.Type.String()...)
			b = append(b, `","value":[`...)
			for j := range v.Len() {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendJSONElem(b, v, j)
			}
			b = append(b, "]}"...)
			continue
		}
		b = append(b, `,"type":"`...)
		b = append(b, v.Type.String()...)
		b = append(b, `","value":`...)
		b = appendJSONElem(b, v, 0)
		b = append(b, '}')
	}
	return append(b, ']')
}

const (
	defaultNaN32 = 0x7fc00000
	defaultNaN64 = 0x7ff8000000000000
)

func appendJSONElem(b []byte, v Value, i int) []byte {
	switch v.Type {
	case TypeString:
		s := v.Strs[i]
		if utf8.ValidString(s) {
			return appendJSONString(b, s)
		}
		b = append(b, `{"base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, []byte(s))
		return append(b, `"}`...)
	case TypeBool:
		return strconv.AppendBool(b, v.Uint(i) != 0)
	case TypeInt8, TypeInt16, TypeInt32, TypeInt64:
		return strconv.AppendInt(b, v.Int(i), 10)
	case TypeFloat32, TypeFloat64:
		bits, size := v.Uint(i), 64
		f := math.Float64frombits(bits)
		if v.Type == TypeFloat32 {
			f, size = float64(math.Float32frombits(uint32(bits))), 32
		}
		switch {
		case math.IsInf(f, 1):
			return append(b, `"inf"`...)
		case math.IsInf(f, -1):
			return append(b, `"-inf"`...)
		case math.IsNaN(f):
			if size == 32 && bits == defaultNaN32 || size == 64 && bits == defaultNaN64 {
				return append(b, `"nan"`...)
			}
			b = append(b, `"nan:0x`...)
			b = strconv.AppendUint(b, bits, 16)
			return append(b, '"')
		}
		return strconv.AppendFloat(b, f, 'g', -1, size)
	}
	return strconv.AppendUint(b, v.Uint(i), 10)
}

// appendJSONString quotes valid UTF-8 s: only '"', '\\' and control
// characters are escaped.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// jsonKV is one entry of EncodeKVs' output.
type jsonKV struct {
	Key   *string         `json:"key"`
	Type  string          `json:"type"`
	Elem  string          `json:"elem"`
	Value json.RawMessage `json:"value"`
	// A reference to the frame that holds the key/value (kvframes.go).
	Count *int            `json:"count"`
	First json.RawMessage `json:"first"`
	Frame *int            `json:"frame"`
}

var typeByValueName = func() map[string]ValueType {
	m := map[string]ValueType{}
	for t, name := range valueTypeNames {
		m[name] = ValueType(t)
	}
	return m
}()

// DecodeKVs reads what EncodeKVs wrote. Anything else (unknown fields or
// types, numbers out of range, duplicate or empty keys) is schema_error.
func DecodeKVs(b []byte) ([]KV, error) {
	kvs, _, err := decodeKVs(b, false)
	return kvs, err
}

// decodeKVs reads EncodeKVs' JSON and, when refsOK, the references to
// frames that a manifest's gguf.kv may hold (storedKVs): by entry index.
func decodeKVs(b []byte, refsOK bool) ([]KV, map[int]frameRef, error) {
	bad := func(format string, args ...any) error {
		return errs.New(errs.SchemaError, pkg, "key/value JSON: "+format, args...)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var raw []jsonKV
	if err := dec.Decode(&raw); err != nil {
		return nil, nil, bad("%v", err)
	}
	if _, err := dec.Token(); err != io.EOF { // More() would miss a stray ']'
		return nil, nil, bad("text after the array")
	}
	out := make([]KV, 0, len(raw))
	var refs map[int]frameRef
	seen := make(map[string]bool, len(raw))
	for _, r := range raw {
		if r.Key == nil {
			return nil, nil, bad("an entry has no key")
		}
		key := *r.Key
		if err := checkKey(key); err != nil {
			return nil, nil, err
		}
		if seen[key] {
			return nil, nil, bad("key %q appears twice", key)
		}
		seen[key] = true
		t, ok := typeByValueName[r.Type]
		if !ok {
			return nil, nil, bad("key %q: unknown type %q", key, r.Type)
		}
		v := Value{Type: t}
		if t == TypeArray {
			if v.Type, ok = typeByValueName[r.Elem]; !ok || v.Type == TypeArray {
				return nil, nil, bad("key %q: bad array element type %q", key, r.Elem)
			}
			v.Array = true
			if r.Frame != nil || r.Count != nil || r.First != nil {
				if !refsOK || r.Value != nil || r.Frame == nil {
					return nil, nil, bad("key %q: a reference to a frame is only read from a manifest, with a frame index and no value", key)
				}
				ref, err := decodeRef(key, &v, r.Count, r.First, *r.Frame)
				if err != nil {
					return nil, nil, err
				}
				if refs == nil {
					refs = map[int]frameRef{}
				}
				refs[len(out)] = ref
				out = append(out, KV{Key: key, Value: v})
				continue
			}
			// Element by element: a tokenizer or a byte array of millions
			// of elements decodes into its Raw bytes or strings, never
			// into a value per element; counted first, to allocate once.
			n := 0
			eachElem(r.Value, func(json.RawMessage) error { n++; return nil })
			if v.Type == TypeString {
				v.Strs = make([]string, 0, n)
			} else {
				v.Raw = make([]byte, 0, n*v.Type.width())
			}
			if err := eachElem(r.Value, v.appendJSON); err != nil {
				return nil, nil, bad("key %q: %v", key, err)
			}
		} else {
			if r.Frame != nil || r.Count != nil || r.First != nil {
				return nil, nil, bad("key %q: only an array is kept by reference", key)
			}
			if r.Elem != "" {
				return nil, nil, bad("key %q: a %s has no element type", key, r.Type)
			}
			if err := v.appendJSON(r.Value); err != nil {
				return nil, nil, bad("key %q: %v", key, err)
			}
		}
		if v.Type == TypeString && v.Strs == nil {
			v.Strs = []string{}
		}
		out = append(out, KV{Key: key, Value: v})
	}
	return out, refs, nil
}

// eachElem calls fn with each element of raw, a JSON array (the decoder
// has checked that raw is valid JSON).
func eachElem(raw []byte, fn func(json.RawMessage) error) error {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return errs.New(errs.SchemaError, pkg, "value is not an array")
	}
	if i = skipSpace(raw, i+1); i < len(raw) && raw[i] == ']' {
		return nil
	}
	for i < len(raw) {
		end := skipValue(raw, i)
		if err := fn(raw[i:end]); err != nil {
			return err
		}
		i = skipSpace(raw, end)
		if i < len(raw) && raw[i] == ']' {
			return nil
		}
		if i >= len(raw) || raw[i] != ',' {
			break
		}
		i = skipSpace(raw, i+1)
	}
	return errs.New(errs.SchemaError, pkg, "value is not an array")
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the valid JSON value at b[i].
func skipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return min(i+1, len(b))
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// appendJSON adds one JSON element to v.
func (v *Value) appendJSON(e json.RawMessage) error {
	if v.Type == TypeString {
		var s string
		if json.Unmarshal(e, &s) == nil {
			v.Strs = append(v.Strs, s)
			return nil
		}
		var o struct {
			Base64 *string `json:"base64"`
		}
		dec := json.NewDecoder(bytes.NewReader(e))
		dec.DisallowUnknownFields()
		if dec.Decode(&o) != nil || o.Base64 == nil {
			return errs.New(errs.SchemaError, pkg, "%s is not a string", e)
		}
		raw, err := base64.StdEncoding.DecodeString(*o.Base64)
		if err != nil {
			return errs.New(errs.SchemaError, pkg, "bad base64: %v", err)
		}
		v.Strs = append(v.Strs, string(raw))
		return nil
	}
	bits, ok := plainInteger(v.Type, e) // the common case, without a string per element
	if !ok {
		var err error
		if bits, err = parseJSONNumber(v.Type, string(e)); err != nil {
			return err
		}
	}
	var b [8]byte
	for i := range b {
		b[i] = byte(bits >> (8 * i))
	}
	v.Raw = append(v.Raw, b[:v.Type.width()]...)
	return nil
}

// plainInteger parses e, an element of an integer type t written as
// EncodeKVs writes it (decimal, '-' only for signed types), when it fits;
// anything else is left to parseJSONNumber.
func plainInteger(t ValueType, e []byte) (uint64, bool) {
	signed := t == TypeInt8 || t == TypeInt16 || t == TypeInt32 || t == TypeInt64
	if !signed && t != TypeUint8 && t != TypeUint16 && t != TypeUint32 && t != TypeUint64 {
		return 0, false
	}
	neg := signed && len(e) > 1 && e[0] == '-'
	digits := e
	if neg {
		digits = e[1:]
	}
	if len(digits) == 0 || len(digits) > 18 || len(digits) > 1 && digits[0] == '0' {
		return 0, false // longer ones may overflow: the general path checks them
	}
	var u uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	bits := uint(t.width() * 8)
	if !signed {
		return u, bits == 64 || u < 1<<bits
	}
	if neg {
		return uint64(-int64(u)), u <= 1<<(bits-1)
	}
	return u, u < 1<<(bits-1)
}

// errNotA is an element that is not of its array's type.
type errNotA struct {
	elem string
	t    ValueType
}

func (e errNotA) Error() string {
	return errs.New(errs.SchemaError, pkg, "%s is not a %s", e.elem, e.t).Error()
}
func (e errNotA) Unwrap() error { return errs.SchemaError }

// parseJSONNumber returns the bits of one element of type t.
func parseJSONNumber(t ValueType, s string) (uint64, error) {
	bad := errNotA{s, t} // formatted only when shown: arrays hold millions of elements
	switch t {
	case TypeBool:
		switch s {
		case "true":
			return 1, nil
		case "false":
			return 0, nil
		}
		return 0, bad
	case TypeFloat32, TypeFloat64:
		size := 64
		if t == TypeFloat32 {
			size = 32
		}
		var f float64
		switch s {
		case `"inf"`:
			f = math.Inf(1)
		case `"-inf"`:
			f = math.Inf(-1)
		case `"nan"`:
			if size == 32 {
				return defaultNaN32, nil
			}
			return defaultNaN64, nil
		default:
			if len(s) > 8 && s[:7] == `"nan:0x` && s[len(s)-1] == '"' {
				bits, err := strconv.ParseUint(s[7:len(s)-1], 16, size)
				if err != nil {
					return 0, bad
				}
				return bits, nil
			}
			if !json.Valid([]byte(s)) || s[0] == '"' || s[0] == '{' || s[0] == '[' || s == "true" || s == "false" || s == "null" {
				return 0, bad
			}
			var err error
			if f, err = strconv.ParseFloat(s, size); err != nil {
				return 0, bad
			}
		}
		if size == 32 {
			return uint64(math.Float32bits(float32(f))), nil
		}
		return math.Float64bits(f), nil
	case TypeInt8, TypeInt16, TypeInt32, TypeInt64:
		w := t.width() * 8
		i, err := strconv.ParseInt(s, 10, w)
		if err != nil {
			return 0, bad
		}
		return uint64(i), nil // appendJSON keeps the low bytes: two's complement
	default:
		u, err := strconv.ParseUint(s, 10, t.width()*8)
		if err != nil {
			return 0, bad
		}
		return u, nil
	}
}

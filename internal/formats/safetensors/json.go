package safetensors

import (
	"bytes"
	"math"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/mstore/mstore/internal/errs"
)

// jsonReader reads one JSON text token by token. It is our own because the
// header rules need what encoding/json does not give: duplicate keys are
// visible (Unmarshal keeps the last one and folds case), lone UTF-16
// surrogates are refused rather than turned into U+FFFD (the reference
// reader, serde_json, refuses them), integers are read without going through
// float64, and every error carries the byte offset in the file.
//
// Syntax errors are schema_error: the bytes are there, they are just not the
// JSON the format requires. Nesting deeper than maxJSONDepth (only possible
// in values we skip) is size_limit_exceeded.
type jsonReader struct {
	b     []byte
	pos   int
	base  int64 // file offset of b[0]
	path  string
	depth int
}

const maxJSONDepth = 64

func newJSONReader(b []byte, base int64, path string) (*jsonReader, error) {
	r := &jsonReader{b: b, base: base, path: path}
	if !utf8.Valid(b) {
		// Point at the first bad byte so the message is useful.
		i := 0
		for i < len(b) {
			c, n := utf8.DecodeRune(b[i:])
			if c == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		r.pos = i
		return nil, r.fail(errs.SchemaError, "JSON is not valid UTF-8")
	}
	return r, nil
}

func (r *jsonReader) offset() int64 { return r.base + int64(r.pos) }

func (r *jsonReader) fail(class errs.Class, format string, args ...any) error {
	if r.pos >= len(r.b) {
		format = "JSON ends early: " + format
	}
	return errs.At(class, pkg, r.path, r.offset(), format, args...)
}

func (r *jsonReader) syntax(want string) error {
	if r.pos >= len(r.b) {
		return r.fail(errs.SchemaError, "want %s", want)
	}
	return r.fail(errs.SchemaError, "JSON syntax: want %s, found %q", want, r.b[r.pos])
}

// peek skips white space and returns the next byte, or 0 at the end.
func (r *jsonReader) peek() byte {
	for r.pos < len(r.b) {
		switch c := r.b[r.pos]; c {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return c
		}
	}
	return 0
}

// end checks that only white space (such as a header's padding) remains.
func (r *jsonReader) end() error {
	if r.peek(); r.pos < len(r.b) {
		return r.syntax("the end of the JSON text")
	}
	return nil
}

// object reads an object, calling member for each key with the reader
// positioned at the key's value; member must read the value. keyAt is the
// key's file offset. Duplicate keys are the caller's to refuse, because the
// caller knows which cheap check fits (flags, a map it keeps anyway).
func (r *jsonReader) object(member func(key string, keyAt int64) error) error {
	if r.peek() != '{' {
		return r.syntax("an object")
	}
	if err := r.enter(); err != nil {
		return err
	}
	r.pos++
	if r.peek() == '}' {
		r.pos++
		r.depth--
		return nil
	}
	for {
		if r.peek() != '"' {
			return r.syntax("a string key")
		}
		keyAt := r.offset()
		key, err := r.str()
		if err != nil {
			return err
		}
		if r.peek() != ':' {
			return r.syntax("':'")
		}
		r.pos++
		if err := member(key, keyAt); err != nil {
			return err
		}
		switch r.peek() {
		case ',':
			r.pos++
		case '}':
			r.pos++
			r.depth--
			return nil
		default:
			return r.syntax("',' or '}'")
		}
	}
}

// array reads an array, calling elem with the reader positioned at each
// element; elem must read it.
func (r *jsonReader) array(elem func() error) error {
	if r.peek() != '[' {
		return r.syntax("an array")
	}
	if err := r.enter(); err != nil {
		return err
	}
	r.pos++
	if r.peek() == ']' {
		r.pos++
		r.depth--
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch r.peek() {
		case ',':
			r.pos++
		case ']':
			r.pos++
			r.depth--
			return nil
		default:
			return r.syntax("',' or ']'")
		}
	}
}

func (r *jsonReader) enter() error {
	r.depth++
	if r.depth > maxJSONDepth {
		return r.fail(errs.SizeLimitExceeded, "JSON nested deeper than %d levels", maxJSONDepth)
	}
	return nil
}

// null consumes a null literal if one is next.
func (r *jsonReader) null() bool {
	return r.peek() == 'n' && r.literal("null")
}

// str reads a string.
func (r *jsonReader) str() (string, error) {
	if r.peek() != '"' {
		return "", r.syntax("a string")
	}
	r.pos++
	start := r.pos
	// Fast path: no escapes, which is every tensor name in practice.
	for r.pos < len(r.b) {
		c := r.b[r.pos]
		if c == '"' {
			s := interned(r.b[start:r.pos])
			r.pos++
			return s, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		r.pos++
	}
	var sb strings.Builder
	sb.Write(r.b[start:r.pos])
	for {
		if r.pos >= len(r.b) {
			return "", r.syntax("'\"' closing the string")
		}
		c := r.b[r.pos]
		switch {
		case c == '"':
			r.pos++
			return sb.String(), nil
		case c < 0x20:
			return "", r.fail(errs.SchemaError, "JSON syntax: control byte 0x%02x inside a string", c)
		case c != '\\':
			sb.WriteByte(c)
			r.pos++
			continue
		}
		if r.pos+1 >= len(r.b) {
			return "", r.syntax("an escape")
		}
		esc := r.b[r.pos+1]
		r.pos += 2
		switch esc {
		case '"', '\\', '/':
			sb.WriteByte(esc)
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'u':
			c, err := r.unicodeEscape()
			if err != nil {
				return "", err
			}
			sb.WriteRune(c)
		default:
			r.pos -= 2
			return "", r.fail(errs.SchemaError, "JSON syntax: invalid escape \\%c", esc)
		}
	}
}

// unicodeEscape reads the XXXX of \uXXXX (and a low surrogate's escape
// after a high one).
func (r *jsonReader) unicodeEscape() (rune, error) {
	first, ok := r.hex4()
	if !ok {
		return 0, r.syntax("four hex digits after \\u")
	}
	if !utf16.IsSurrogate(first) {
		return first, nil
	}
	if first < 0xdc00 && r.pos+1 < len(r.b) && r.b[r.pos] == '\\' && r.b[r.pos+1] == 'u' {
		r.pos += 2
		second, ok := r.hex4()
		if !ok {
			return 0, r.syntax("four hex digits after \\u")
		}
		if c := utf16.DecodeRune(first, second); c != utf8.RuneError {
			return c, nil
		}
	}
	return 0, r.fail(errs.SchemaError, "JSON string holds a lone UTF-16 surrogate")
}

func (r *jsonReader) hex4() (rune, bool) {
	if r.pos+4 > len(r.b) {
		return 0, false
	}
	var v rune
	for _, c := range r.b[r.pos : r.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	r.pos += 4
	return v, true
}

// number reads a JSON number and reports its parts: whether it is
// negative, and whether it has a fraction or an exponent.
func (r *jsonReader) number() (digits []byte, negative, integral bool, err error) {
	r.peek()
	start := r.pos
	if r.pos < len(r.b) && r.b[r.pos] == '-' {
		negative = true
		r.pos++
	}
	intStart := r.pos
	r.skipDigits()
	digits = r.b[intStart:r.pos]
	if len(digits) == 0 || len(digits) > 1 && digits[0] == '0' {
		r.pos = start
		return nil, false, false, r.syntax("a number")
	}
	integral = true
	if r.pos < len(r.b) && r.b[r.pos] == '.' {
		integral = false
		r.pos++
		if r.skipDigits() == 0 {
			return nil, false, false, r.syntax("digits after '.'")
		}
	}
	if r.pos < len(r.b) && (r.b[r.pos] == 'e' || r.b[r.pos] == 'E') {
		integral = false
		r.pos++
		if r.pos < len(r.b) && (r.b[r.pos] == '+' || r.b[r.pos] == '-') {
			r.pos++
		}
		if r.skipDigits() == 0 {
			return nil, false, false, r.syntax("digits in the exponent")
		}
	}
	return digits, negative, integral, nil
}

func (r *jsonReader) skipDigits() int {
	start := r.pos
	for r.pos < len(r.b) && r.b[r.pos] >= '0' && r.b[r.pos] <= '9' {
		r.pos++
	}
	return r.pos - start
}

// uint reads a non-negative integer (no fraction, no exponent, as the
// reference reader's usize fields demand). Values past 2⁶⁴-1 saturate at
// math.MaxUint64: every caller bounds the value below that anyway, so the
// bound check names the real problem.
func (r *jsonReader) uint(what string) (uint64, error) {
	at := r.pos
	digits, negative, integral, err := r.number()
	if err != nil {
		return 0, err
	}
	if negative || !integral {
		r.pos = at
		r.peek()
		return 0, r.fail(errs.SchemaError, "%s must be a non-negative integer", what)
	}
	var v uint64
	for _, c := range digits {
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return math.MaxUint64, nil
		}
		v = v*10 + d
	}
	return v, nil
}

// skip reads any value; objects in it must not repeat a key.
func (r *jsonReader) skip() error {
	switch c := r.peek(); {
	case c == '{':
		seen := map[string]bool{}
		return r.object(func(key string, keyAt int64) error {
			if seen[key] {
				return errs.At(errs.SchemaError, pkg, r.path, keyAt, "duplicate key %q", key)
			}
			seen[key] = true
			return r.skip()
		})
	case c == '[':
		return r.array(r.skip)
	case c == '"':
		_, err := r.str()
		return err
	case c == '-' || c >= '0' && c <= '9':
		_, _, _, err := r.number()
		return err
	case r.null():
		return nil
	case r.literal("true") || r.literal("false"):
		return nil
	default:
		return r.syntax("a value")
	}
}

func (r *jsonReader) literal(word string) bool {
	if bytes.HasPrefix(r.b[r.pos:], []byte(word)) {
		r.pos += len(word)
		return true
	}
	return false
}

// interned returns b as a string, without allocating for the keys every
// tensor entry repeats and the dtypes (the switch on string(b) does not
// copy b).
func interned(b []byte) string {
	switch string(b) {
	case "dtype":
		return "dtype"
	case "shape":
		return "shape"
	case "data_offsets":
		return "data_offsets"
	case "F32":
		return "F32"
	case "F16":
		return "F16"
	case "BF16":
		return "BF16"
	case "F64":
		return "F64"
	case "I64":
		return "I64"
	case "I32":
		return "I32"
	case "I8":
		return "I8"
	case "U8":
		return "U8"
	case "BOOL":
		return "BOOL"
	}
	return string(b)
}

// Package strictjson reads one JSON text token by token, for the codecs
// whose headers and indexes are JSON (SafeTensors headers, Hugging Face
// shard indexes). It is our own because those rules need what
// encoding/json does not give: duplicate keys are visible (Unmarshal
// keeps the last one and folds case), lone UTF-16 surrogates are refused
// rather than turned into U+FFFD (the reference reader, serde_json,
// refuses them), integers are read without going through float64, every
// error carries the byte offset in the file, and a header of 100,000
// entries is read without a token or an allocation per value (names
// aside).
//
// Syntax errors are schema_error: the bytes are there, they are just not
// the JSON the format requires. Nesting deeper than MaxDepth is
// size_limit_exceeded.
package strictjson

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/mstore/mstore/internal/errs"
)

// Reader reads the JSON text of a file; errors name package pkg and the
// file's path, at file offsets.
type Reader struct {
	// Intern, when set, gives the string for the bytes of a string value
	// or key without escapes, if it has one (ok): the keys and values a
	// format repeats in every entry are then not allocated each time.
	Intern func(b []byte) (s string, ok bool)

	b     []byte
	pos   int
	base  int64 // file offset of b[0]
	pkg   string
	path  string
	depth int
}

// MaxDepth bounds the nesting of objects and arrays.
const MaxDepth = 64

// New returns a Reader of b, the bytes of path from file offset base. Bytes
// that are not UTF-8 are refused first (schema_error).
func New(b []byte, base int64, pkg, path string) (*Reader, error) {
	r := &Reader{b: b, base: base, pkg: pkg, path: path}
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
		return nil, r.Fail(errs.SchemaError, "JSON is not valid UTF-8")
	}
	return r, nil
}

// Offset is the file offset of the next byte.
func (r *Reader) Offset() int64 { return r.base + int64(r.pos) }

// Fail returns an error of class at the reader's offset.
func (r *Reader) Fail(class errs.Class, format string, args ...any) error {
	if r.pos >= len(r.b) {
		format = "JSON ends early: " + format
	}
	return errs.At(class, r.pkg, r.path, r.Offset(), format, args...)
}

// FailAt returns an error of class at file offset at (a key's, say).
func (r *Reader) FailAt(class errs.Class, at int64, format string, args ...any) error {
	return errs.At(class, r.pkg, r.path, at, format, args...)
}

// Since returns the bytes read from file offset from (where a value began)
// to the reader's offset.
func (r *Reader) Since(from int64) []byte { return r.b[from-r.base : r.pos] }

// Path is the path of the file read, for messages.
func (r *Reader) Path() string { return r.path }

func (r *Reader) syntax(want string) error {
	if r.pos >= len(r.b) {
		return r.Fail(errs.SchemaError, "want %s", want)
	}
	return r.Fail(errs.SchemaError, "JSON syntax: want %s, found %q", want, r.b[r.pos])
}

// Peek skips white space and returns the next byte, or 0 at the end.
func (r *Reader) Peek() byte {
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

// End checks that only white space (such as a header's padding) remains.
func (r *Reader) End() error {
	if r.Peek(); r.pos < len(r.b) {
		return r.syntax("the end of the JSON text")
	}
	return nil
}

// Object reads an object, calling member for each key with the reader
// positioned at the key's value; member must read the value. keyAt is the
// key's file offset. Duplicate keys are the caller's to refuse, because the
// caller knows which cheap check fits (flags, a map it keeps anyway).
func (r *Reader) Object(member func(key string, keyAt int64) error) error {
	return r.Members(member, true, true)
}

// Members reads one part of an object that a caller cut at some of its
// own commas (the commas belong to no part), so that the parts can be read
// at once by Readers of their own: the first part opens the object, the
// last closes it, and a part that does not close it must end, in its
// bytes, just after a member's value (white space aside). A part that is
// not the first is read as inside the object (depth 1). Object is the one
// part that is both first and last.
//
// The end of a part's bytes is accepted there only; everywhere else the
// reader treats it as it treats the ',' that follows the part in the
// whole text (a number or a literal stops, anything else is an error), so
// parts that each read without error read exactly as the whole would.
func (r *Reader) Members(member func(key string, keyAt int64) error, first, last bool) error {
	if first {
		if r.Peek() != '{' {
			return r.syntax("an object")
		}
		if err := r.enter(); err != nil {
			return err
		}
		r.pos++
		if r.Peek() == '}' && last {
			r.pos++
			r.depth--
			return nil
		}
	} else if err := r.enter(); err != nil {
		return err
	}
	for {
		if r.Peek() != '"' {
			return r.syntax("a string key")
		}
		keyAt := r.Offset()
		key, err := r.Str()
		if err != nil {
			return err
		}
		if r.Peek() != ':' {
			return r.syntax("':'")
		}
		r.pos++
		if err := member(key, keyAt); err != nil {
			return err
		}
		switch c := r.Peek(); {
		case c == ',':
			r.pos++
		case c == '}' && last:
			r.pos++
			r.depth--
			return nil
		case r.pos >= len(r.b) && !last:
			r.depth--
			return nil
		default:
			return r.syntax("',' or '}'")
		}
	}
}

// Array reads an array, calling elem with the reader positioned at each
// element; elem must read it.
func (r *Reader) Array(elem func() error) error {
	if r.Peek() != '[' {
		return r.syntax("an array")
	}
	if err := r.enter(); err != nil {
		return err
	}
	r.pos++
	if r.Peek() == ']' {
		r.pos++
		r.depth--
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch r.Peek() {
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

func (r *Reader) enter() error {
	r.depth++
	if r.depth > MaxDepth {
		return r.Fail(errs.SizeLimitExceeded, "JSON nested deeper than %d levels", MaxDepth)
	}
	return nil
}

// Null consumes a null literal if one is next.
func (r *Reader) Null() bool {
	return r.Peek() == 'n' && r.literal("null")
}

// Str reads a string.
func (r *Reader) Str() (string, error) {
	if r.Peek() != '"' {
		return "", r.syntax("a string")
	}
	r.pos++
	start := r.pos
	// Fast path: no escapes, which is every tensor name in practice. Eight
	// bytes at a time up to the first that may end it (a quote, an escape
	// or a control byte), then byte by byte: a string per tensor name
	// made a byte loop a tenth of a 100,000-tensor header's parse.
	for r.pos+8 <= len(r.b) && plain8(binary.LittleEndian.Uint64(r.b[r.pos:])) {
		r.pos += 8
	}
	for r.pos < len(r.b) {
		c := r.b[r.pos]
		if c == '"' {
			b := r.b[start:r.pos]
			r.pos++
			if r.Intern != nil {
				if s, ok := r.Intern(b); ok {
					return s, nil
				}
			}
			return string(b), nil
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
			return "", r.Fail(errs.SchemaError, "JSON syntax: control byte 0x%02x inside a string", c)
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
			return "", r.Fail(errs.SchemaError, "JSON syntax: invalid escape \\%c", esc)
		}
	}
}

const ones, highs = 0x0101010101010101, 0x8080808080808080

// plain8 reports whether none of the eight bytes of x is '"', '\\' or
// below 0x20. (y - ones) &^ y & highs is not zero exactly when a byte of y
// is zero, and (x - 0x20*ones) &^ x & highs exactly when one of x is below
// 0x20 (bytes of 0x80 and above never count).
func plain8(x uint64) bool {
	q, bs := x^('"'*ones), x^('\\'*ones)
	return ((q-ones)&^q|(bs-ones)&^bs|(x-0x20*ones)&^x)&highs == 0
}

// unicodeEscape reads the XXXX of \uXXXX (and a low surrogate's escape
// after a high one).
func (r *Reader) unicodeEscape() (rune, error) {
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
	return 0, r.Fail(errs.SchemaError, "JSON string holds a lone UTF-16 surrogate")
}

func (r *Reader) hex4() (rune, bool) {
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

// Number reads a JSON number and reports its parts: whether it is
// negative, and whether it has a fraction or an exponent.
func (r *Reader) Number() (digits []byte, negative, integral bool, err error) {
	r.Peek()
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

func (r *Reader) skipDigits() int {
	start := r.pos
	for r.pos < len(r.b) && r.b[r.pos] >= '0' && r.b[r.pos] <= '9' {
		r.pos++
	}
	return r.pos - start
}

// Uint reads a non-negative integer (no fraction, no exponent, as the
// reference reader's usize fields demand). Values past 2⁶⁴-1 saturate at
// math.MaxUint64: every caller bounds the value below that anyway, so the
// bound check names the real problem.
func (r *Reader) Uint(what string) (uint64, error) {
	at := r.pos
	digits, negative, integral, err := r.Number()
	if err != nil {
		return 0, err
	}
	if negative || !integral {
		r.pos = at
		r.Peek()
		return 0, r.Fail(errs.SchemaError, "%s must be a non-negative integer", what)
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

// SkipValue reads any value. Duplicate keys in it are not refused: nothing of
// it is kept (encoding/json takes them too).
func (r *Reader) SkipValue() error {
	switch c := r.Peek(); {
	case c == '{':
		return r.Object(func(string, int64) error { return r.SkipValue() })
	case c == '[':
		return r.Array(r.SkipValue)
	case c == '"':
		_, err := r.Str()
		return err
	case c == '-' || c >= '0' && c <= '9':
		_, _, _, err := r.Number()
		return err
	case r.Null():
		return nil
	case r.literal("true") || r.literal("false"):
		return nil
	default:
		return r.syntax("a value")
	}
}

func (r *Reader) literal(word string) bool {
	if bytes.HasPrefix(r.b[r.pos:], []byte(word)) {
		r.pos += len(word)
		return true
	}
	return false
}

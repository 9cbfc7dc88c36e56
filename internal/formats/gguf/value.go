package gguf

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"

	"github.com/mstore/mstore/internal/errs"
)

// ValueType is the type of a key's value (enum gguf_type).
type ValueType uint32

// The value types of the GGUF spec. TypeArray is followed, in the file, by
// the element type and the element count.
const (
	TypeUint8 ValueType = iota
	TypeInt8
	TypeUint16
	TypeInt16
	TypeUint32
	TypeInt32
	TypeFloat32
	TypeBool
	TypeString
	TypeArray
	TypeUint64
	TypeInt64
	TypeFloat64
	typeCount
)

// valueTypeNames are gguf.cpp's names (GGUF_TYPE_NAME), used in JSON and
// in messages.
var valueTypeNames = [typeCount]string{"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"}

func (t ValueType) String() string {
	if t < typeCount {
		return valueTypeNames[t]
	}
	return "unknown"
}

// width is the size in bytes of a fixed-size value, 0 for strings and arrays.
func (t ValueType) width() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// KV is one key/value pair of a GGUF file.
type KV struct {
	Key   string
	Value Value
}

// Value is a scalar or an array of one element type, kept exactly as the
// file holds it: numbers and bools as their little-endian bytes in Raw
// (Len()*width bytes), strings as Go strings (any bytes, not necessarily
// UTF-8). Type is the scalar or element type, never TypeArray.
type Value struct {
	Type  ValueType
	Array bool
	Raw   []byte
	Strs  []string
	// count, when not 0, is the length of an array that a manifest keeps
	// by reference (kvframes.go): Raw or Strs hold its first elements only,
	// for show; nothing writes such a value.
	count int
}

// Equal reports whether v and w are the same value, bit for bit (as their
// EncodeKVs JSON would be), without encoding either.
func (v Value) Equal(w Value) bool {
	return v.Type == w.Type && v.Array == w.Array && bytes.Equal(v.Raw, w.Raw) && slices.Equal(v.Strs, w.Strs)
}

// Len is the number of elements (1 for a scalar).
func (v Value) Len() int {
	if v.count > 0 {
		return v.count
	}
	if v.Type == TypeString {
		return len(v.Strs)
	}
	if w := v.Type.width(); w > 0 {
		return len(v.Raw) / w
	}
	return 0
}

// Uint returns element i of an unsigned or bool value.
func (v Value) Uint(i int) uint64 {
	w := v.Type.width()
	b := v.Raw[i*w : (i+1)*w]
	switch w {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	}
	return binary.LittleEndian.Uint64(b)
}

// Int returns element i of a signed value, sign-extended.
func (v Value) Int(i int) int64 {
	u := v.Uint(i)
	switch v.Type.width() {
	case 1:
		return int64(int8(u))
	case 2:
		return int64(int16(u))
	case 4:
		return int64(int32(u))
	}
	return int64(u)
}

// Float returns element i of an f32 or f64 value.
func (v Value) Float(i int) float64 {
	if v.Type == TypeFloat32 {
		return float64(math.Float32frombits(uint32(v.Uint(i))))
	}
	return math.Float64frombits(v.Uint(i))
}

func scalarBits(t ValueType, bits uint64) Value {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, bits)
	return Value{Type: t, Raw: b[:t.width()]}
}

// Uint16Value, Uint32Value, Int32Value, Uint64Value and StringValue make
// scalar values.
func Uint16Value(v uint16) Value   { return scalarBits(TypeUint16, uint64(v)) }
func Uint32Value(v uint32) Value   { return scalarBits(TypeUint32, uint64(v)) }
func Int32Value(v int32) Value     { return scalarBits(TypeInt32, uint64(uint32(v))) }
func Uint64Value(v uint64) Value   { return scalarBits(TypeUint64, v) }
func StringValue(s string) Value   { return Value{Type: TypeString, Strs: []string{s}} }
func Float32Value(f float32) Value { return scalarBits(TypeFloat32, uint64(math.Float32bits(f))) }

// BoolValue makes a bool scalar.
func BoolValue(b bool) Value {
	if b {
		return scalarBits(TypeBool, 1)
	}
	return scalarBits(TypeBool, 0)
}

// ArrayValue makes an array of fixed-size elements from their bits.
func ArrayValue(elem ValueType, bits []uint64) Value {
	w := elem.width()
	raw := make([]byte, 0, len(bits)*w)
	var b [8]byte
	for _, x := range bits {
		binary.LittleEndian.PutUint64(b[:], x)
		raw = append(raw, b[:w]...)
	}
	return Value{Type: elem, Array: true, Raw: raw}
}

// StringArray makes an array of strings.
func StringArray(s []string) Value { return Value{Type: TypeString, Array: true, Strs: s} }

// uintOf returns the value of a scalar of unsigned type t, or false.
func uintOf(v Value, t ValueType) (uint64, bool) {
	if v.Array || v.Type != t || v.Len() != 1 {
		return 0, false
	}
	return v.Uint(0), true
}

// appendString appends a GGUF string: u64 length, then the bytes.
func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// appendKV appends a key/value pair as a GGUF file holds it.
func appendKV(b []byte, kv KV) []byte {
	b = appendString(b, kv.Key)
	v := kv.Value
	if v.Array {
		b = binary.LittleEndian.AppendUint32(b, uint32(TypeArray))
		b = binary.LittleEndian.AppendUint32(b, uint32(v.Type))
		b = binary.LittleEndian.AppendUint64(b, uint64(v.Len()))
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(v.Type))
	}
	if v.Type == TypeString {
		for _, s := range v.Strs {
			b = appendString(b, s)
		}
		return b
	}
	return append(b, v.Raw...)
}

// kvSize is the number of bytes appendKV writes for kv.
func kvSize(kv KV) int64 {
	n := int64(8 + len(kv.Key) + 4)
	if kv.Value.Array {
		n += 4 + 8
	}
	if kv.Value.Type == TypeString {
		for _, s := range kv.Value.Strs {
			n += 8 + int64(len(s))
		}
		return n
	}
	return n + int64(len(kv.Value.Raw))
}

// jsonSize bounds the length of v in EncodeKVs' JSON: the longest
// decimal of each element type, and strings at worst escaped ("\u00XX")
// or in base64.
func jsonSize(v Value) int64 {
	if v.Type == TypeString {
		var n int64
		for _, s := range v.Strs {
			n += 6*int64(len(s)) + 16
		}
		return n
	}
	perElem := map[ValueType]int64{TypeUint8: 4, TypeInt8: 5, TypeBool: 6, TypeUint16: 6, TypeInt16: 7,
		TypeUint32: 11, TypeInt32: 12, TypeFloat32: 16, TypeUint64: 21, TypeInt64: 21, TypeFloat64: 26}[v.Type]
	return int64(v.Len()) * perElem
}

// checkValue refuses what a GGUF value cannot be: an unknown or nested
// type, a scalar that is not one element, raw bytes that are not whole
// elements, and bools other than 0 and 1 (the spec calls anything else
// invalid).
func checkValue(v Value) error {
	switch {
	case v.Type >= typeCount:
		return errs.New(errs.UnsupportedVersion, pkg, "unknown value type %d", uint32(v.Type))
	case v.Type == TypeArray:
		return errs.New(errs.UnsupportedVersion, pkg, "nested arrays are not supported")
	case !v.Array && v.Len() != 1:
		return errs.New(errs.SchemaError, pkg, "a scalar %s holds %d elements", v.Type, v.Len())
	case v.Type != TypeString && len(v.Raw)%v.Type.width() != 0:
		return errs.New(errs.SchemaError, pkg, "%d bytes are not whole %s elements", len(v.Raw), v.Type)
	}
	if v.Type == TypeBool {
		for _, c := range v.Raw {
			if c > 1 {
				return errs.New(errs.SchemaError, pkg, "bool byte %d is neither 0 nor 1", c)
			}
		}
	}
	return nil
}

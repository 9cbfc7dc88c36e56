package onnx

import (
	"math"
	"math/bits"

	"github.com/mstore/mstore/internal/errs"
)

// ONNX TensorProto.DataType values this build knows (onnx.proto, IR 13).
const (
	typeUndefined  = 0
	typeFloat      = 1
	typeString     = 8
	typeDouble     = 11
	typeComplex64  = 14
	typeComplex128 = 15
	maxKnownType   = 26 // INT2
)

// dtypeInfo is a data type's name in layouts and its element width in bits.
type dtypeInfo struct {
	name string
	bits int64
}

// dtypes maps ONNX data types to the SafeTensors dtype names where
// SafeTensors has the same type, else to the upper-case ONNX name. Packed
// sub-byte types (4 and 2 bits) round the tensor up to whole bytes, as
// ONNX stores them (the first element in the low bits).
var dtypes = map[int64]dtypeInfo{
	1:  {"F32", 32},
	2:  {"U8", 8},
	3:  {"I8", 8},
	4:  {"U16", 16},
	5:  {"I16", 16},
	6:  {"I32", 32},
	7:  {"I64", 64},
	8:  {"STRING", 0}, // never raw: strings live in string_data, in the frame
	9:  {"BOOL", 8},
	10: {"F16", 16},
	11: {"F64", 64},
	12: {"U32", 32},
	13: {"U64", 64},
	14: {"C64", 64},
	15: {"COMPLEX128", 128},
	16: {"BF16", 16},
	17: {"F8_E4M3", 8}, // FLOAT8E4M3FN: SafeTensors' F8_E4M3 is the same "fn" type
	18: {"FLOAT8E4M3FNUZ", 8},
	19: {"F8_E5M2", 8},
	20: {"FLOAT8E5M2FNUZ", 8},
	21: {"UINT4", 4},
	22: {"INT4", 4},
	23: {"F4", 4}, // FLOAT4E2M1
	24: {"F8_E8M0", 8},
	25: {"UINT2", 2},
	26: {"INT2", 2},
}

// DTypeName returns the layout dtype of an ONNX data type, and whether
// this build knows it.
func DTypeName(dataType int64) (string, bool) {
	d, ok := dtypes[dataType]
	return d.name, ok
}

// tensorSize returns the byte size of a tensor of dataType with dims. An
// unknown type is unsupported_version; UNDEFINED, STRING (no fixed width),
// negative dimensions and sizes that overflow are schema_error.
func tensorSize(dataType int64, dims []int64) (int64, error) {
	if dataType == typeUndefined {
		return 0, errs.New(errs.SchemaError, pkg, "data_type UNDEFINED")
	}
	d, ok := dtypes[dataType]
	if !ok {
		return 0, errs.New(errs.UnsupportedVersion, pkg, "data_type %d is newer than this build knows (up to %d)", dataType, maxKnownType)
	}
	if d.bits == 0 {
		return 0, errs.New(errs.SchemaError, pkg, "%s tensors have no fixed-width bytes", d.name)
	}
	elems, err := elementCount(dims)
	if err != nil {
		return 0, err
	}
	hi, nbits := bits.Mul64(uint64(elems), uint64(d.bits))
	if hi != 0 || nbits > math.MaxInt64-7 {
		return 0, errs.New(errs.SchemaError, pkg, "dims %v of %s: size overflows", dims, d.name)
	}
	return int64((nbits + 7) / 8), nil
}

// elementCount multiplies dims with overflow checks; an empty dims is a
// scalar (one element).
func elementCount(dims []int64) (int64, error) {
	n := int64(1)
	for _, d := range dims {
		if d < 0 {
			return 0, errs.New(errs.SchemaError, pkg, "dims %v have a negative dimension", dims)
		}
		hi, lo := bits.Mul64(uint64(n), uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, errs.New(errs.SchemaError, pkg, "dims %v: element count overflows", dims)
		}
		n = int64(lo)
	}
	return n, nil
}

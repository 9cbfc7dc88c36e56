package safetensors

import (
	"math"
	"math/bits"

	"github.com/mstore/mstore/internal/errs"
)

// dtypeBits is the width in bits of one element of each dtype of the
// SafeTensors spec (safetensors/src/tensor.rs, Dtype::bitsize). F4 and the
// F6 types are packed: a tensor of them must fill whole bytes.
var dtypeBits = map[string]int64{
	"BOOL":    8,
	"F4":      4,
	"F6_E2M3": 6,
	"F6_E3M2": 6,
	"U8":      8,
	"I8":      8,
	"F8_E5M2": 8,
	"F8_E4M3": 8,
	"F8_E8M0": 8,
	"I16":     16,
	"U16":     16,
	"F16":     16,
	"BF16":    16,
	"I32":     32,
	"U32":     32,
	"F32":     32,
	"C64":     64,
	"F64":     64,
	"I64":     64,
	"U64":     64,
}

// TensorSize returns the byte size of a tensor of dtype and shape.
//
// An unknown dtype is unsupported_version. A shape with a negative
// dimension, whose element count or bit count overflows int64 (no file can
// hold such a tensor), or whose bit count is not a whole number of bytes is
// schema_error: the header describes a tensor that cannot exist, which is
// invalid content rather than a limit we chose. The element count is folded
// left to right with overflow checks, as the reference reader does.
func TensorSize(dtype string, shape []int64) (int64, error) {
	width, ok := dtypeBits[dtype]
	if !ok {
		return 0, errs.New(errs.UnsupportedVersion, pkg, "unknown dtype %q", dtype)
	}
	elems := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, errs.New(errs.SchemaError, pkg, "shape %v has a negative dimension", shape)
		}
		hi, lo := bits.Mul64(uint64(elems), uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, errs.New(errs.SchemaError, pkg, "shape %v: element count overflows", shape)
		}
		elems = int64(lo)
	}
	hi, nbits := bits.Mul64(uint64(elems), uint64(width))
	if hi != 0 || nbits > math.MaxInt64 {
		return 0, errs.New(errs.SchemaError, pkg, "shape %v of %s: size overflows", shape, dtype)
	}
	if nbits%8 != 0 {
		return 0, errs.New(errs.SchemaError, pkg, "shape %v of %s is %d bits, not a whole number of bytes", shape, dtype, nbits)
	}
	return int64(nbits / 8), nil
}

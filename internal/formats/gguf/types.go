package gguf

import (
	"math"
	"math/bits"

	"github.com/mstore/mstore/internal/errs"
)

// TypeID is a ggml tensor type as stored in a tensor info (enum ggml_type).
type TypeID uint32

// typeInfo is one ggml type: its name (upper case, the manifest's dtype), how
// many elements a block holds and how many bytes a block takes. Non-block
// types have BlockSize 1.
type typeInfo struct {
	Name      string
	BlockSize int64
	TypeSize  int64
	Quantized bool
}

// ggmlTypes is every type id a GGUF file may use, with ggml's type traits:
// ggml/include/ggml.h (enum ggml_type), ggml/src/ggml.c (type_traits) and
// gguf-py/gguf/constants.py (GGML_QUANT_SIZES), cross-checked against
// gpustack/gguf-parser-go. QK_K is 256. Ids 4 and 5 (Q4_2, Q4_3), 31-33
// (Q4_0_4_4, Q4_0_4_8, Q4_0_8_8) and 36-38 (IQ4_NL_4_4, _4_8, _8_8) were
// removed from ggml (block size 0 in its traits): a file using them, or an id
// above the last, is unsupported_version.
var ggmlTypes = map[TypeID]typeInfo{
	0:  {"F32", 1, 4, false},
	1:  {"F16", 1, 2, false},
	2:  {"Q4_0", 32, 2 + 16, true},
	3:  {"Q4_1", 32, 2 + 2 + 16, true},
	6:  {"Q5_0", 32, 2 + 4 + 16, true},
	7:  {"Q5_1", 32, 2 + 2 + 4 + 16, true},
	8:  {"Q8_0", 32, 2 + 32, true},
	9:  {"Q8_1", 32, 2 + 2 + 32, true},                       // ggml-common.h: two halves; constants.py still says 4 + 4 + 32
	10: {"Q2_K", 256, 2 + 2 + 256/16 + 256/4, true},          // 84
	11: {"Q3_K", 256, 2 + 256/4 + 256/8 + 12, true},          // 110
	12: {"Q4_K", 256, 2 + 2 + 256/2 + 12, true},              // 144
	13: {"Q5_K", 256, 2 + 2 + 256/2 + 256/8 + 12, true},      // 176
	14: {"Q6_K", 256, 2 + 256/2 + 256/4 + 256/16, true},      // 210
	15: {"Q8_K", 256, 4 + 256 + 256/8, true},                 // 292
	16: {"IQ2_XXS", 256, 2 + 256/4, true},                    // 66
	17: {"IQ2_XS", 256, 2 + 256/4 + 256/32, true},            // 74
	18: {"IQ3_XXS", 256, 2 + 256/4 + 256/8, true},            // 98
	19: {"IQ1_S", 256, 2 + 256/8 + 256/16, true},             // 50
	20: {"IQ4_NL", 32, 2 + 16, true},                         // 18
	21: {"IQ3_S", 256, 2 + 256/4 + 256/8 + 256/32 + 4, true}, // 110
	22: {"IQ2_S", 256, 2 + 256/4 + 256/16, true},             // 82
	23: {"IQ4_XS", 256, 2 + 2 + 256/2 + 256/64, true},        // 136
	24: {"I8", 1, 1, false},
	25: {"I16", 1, 2, false},
	26: {"I32", 1, 4, false},
	27: {"I64", 1, 8, false},
	28: {"F64", 1, 8, false},
	29: {"IQ1_M", 256, 256/8 + 256/16 + 256/32, true}, // 56
	30: {"BF16", 1, 2, false},
	34: {"TQ1_0", 256, 2 + 4*13, true}, // 54
	35: {"TQ2_0", 256, 2 + 64, true},   // 66
	39: {"MXFP4", 32, 1 + 16, true},    // 17
	40: {"NVFP4", 64, 4 + 32, true},    // 36
	41: {"Q1_0", 128, 2 + 16, true},    // 18
	42: {"Q2_0", 64, 2 + 16, true},     // 18
}

// removedTypes are ids ggml once had and dropped; they get a precise message.
var removedTypes = map[TypeID]string{
	4: "Q4_2", 5: "Q4_3", 31: "Q4_0_4_4", 32: "Q4_0_4_8", 33: "Q4_0_8_8",
	36: "IQ4_NL_4_4", 37: "IQ4_NL_4_8", 38: "IQ4_NL_8_8",
}

var typeByName = func() map[string]TypeID {
	m := make(map[string]TypeID, len(ggmlTypes))
	for id, t := range ggmlTypes {
		m[t.Name] = id
	}
	return m
}()

// TypeByName returns the type id of a dtype name ("Q4_K", "BF16").
func TypeByName(name string) (TypeID, bool) {
	id, ok := typeByName[name]
	return id, ok
}

// TypeName returns the dtype name of a type id, or "" for an unknown id.
func TypeName(id TypeID) string { return ggmlTypes[id].Name }

// IsQuantized reports whether dtype is one of ggml's block-quantized types.
func IsQuantized(dtype string) bool {
	id, ok := typeByName[dtype]
	return ok && ggmlTypes[id].Quantized
}

// BlockSize returns how many elements one block of dtype holds and how many
// bytes it takes; ok is false for a dtype GGUF does not have.
func BlockSize(dtype string) (elems, bytes int64, ok bool) {
	id, ok := typeByName[dtype]
	if !ok {
		return 0, 0, false
	}
	t := ggmlTypes[id]
	return t.BlockSize, t.TypeSize, true
}

func lookupType(id TypeID) (typeInfo, error) {
	if t, ok := ggmlTypes[id]; ok {
		return t, nil
	}
	if name, ok := removedTypes[id]; ok {
		return typeInfo{}, errs.New(errs.UnsupportedVersion, pkg, "ggml type %d (%s) was removed from ggml and GGUF files", id, name)
	}
	return typeInfo{}, errs.New(errs.UnsupportedVersion, pkg, "unknown ggml type %d", id)
}

// TensorSize returns the byte size of a tensor of dtype and row-major shape
// (the reverse of GGUF's ne[]), as ggml_nbytes computes it: the innermost
// dimension must be a whole number of blocks. A dtype GGUF does not have is
// unsupported_version; a negative dimension, a row that is not whole blocks
// or a size that overflows int64 is schema_error.
func TensorSize(dtype string, shape []int64) (int64, error) {
	id, ok := typeByName[dtype]
	if !ok {
		return 0, errs.New(errs.UnsupportedVersion, pkg, "GGUF has no type %q", dtype)
	}
	ne := make([]int64, len(shape))
	for i, d := range shape {
		ne[len(shape)-1-i] = d
	}
	return nbytes(ggmlTypes[id], ne)
}

// nbytes is the size of a tensor of type t with dims ne (fastest first).
func nbytes(t typeInfo, ne []int64) (int64, error) {
	elems := uint64(1)
	for _, d := range ne {
		if d < 0 {
			return 0, errs.New(errs.SchemaError, pkg, "dimension %d is negative", d)
		}
		hi, lo := bits.Mul64(elems, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, errs.New(errs.SchemaError, pkg, "dims %v: element count overflows", ne)
		}
		elems = lo
	}
	if len(ne) > 0 && ne[0]%t.BlockSize != 0 {
		return 0, errs.New(errs.SchemaError, pkg, "a row of %d elements is not a whole number of %s blocks of %d", ne[0], t.Name, t.BlockSize)
	}
	if len(ne) == 0 && t.BlockSize != 1 {
		return 0, errs.New(errs.SchemaError, pkg, "a scalar cannot be %s (blocks of %d)", t.Name, t.BlockSize)
	}
	hi, lo := bits.Mul64(elems/uint64(t.BlockSize), uint64(t.TypeSize))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, errs.New(errs.SchemaError, pkg, "dims %v of %s: byte size overflows", ne, t.Name)
	}
	return int64(lo), nil
}

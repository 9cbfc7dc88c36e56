// Package cast converts floating-point tensors between dtypes for checkout's
// --dtype: a formats.Transform per tensor, refusing (lossy_conversion) values
// the target cannot hold. Every planner that casts uses it.
package cast

import (
	"encoding/binary"
	"math"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

// floatFormat is an IEEE binary floating-point format a checkout can cast
// between.
type floatFormat struct {
	bytes        int
	ebits, mbits uint
	max          float64 // largest finite value
}

var floatFormats = map[string]floatFormat{
	"F16":  {2, 5, 10, 65504},
	"BF16": {2, 8, 7, 0x1.fep127},
	"F32":  {4, 8, 23, math.MaxFloat32},
	"F64":  {8, 11, 52, math.MaxFloat64},
}

// Targets are the dtypes --dtype takes, by the names a user types.
var Targets = map[string]string{"f16": "F16", "fp16": "F16", "float16": "F16", "bf16": "BF16", "bfloat16": "BF16", "f32": "F32", "fp32": "F32", "float32": "F32"}

// DType resolves a --dtype value ("f16", "BF16", …) to a dtype, "" for none.
func DType(opt string) (string, error) {
	if opt == "" {
		return "", nil
	}
	if d, ok := Targets[strings.ToLower(opt)]; ok {
		return d, nil
	}
	return "", errs.New(errs.SchemaError, "checkout", "--dtype %q: want f16, bf16 or f32", opt)
}

// Tensors applies --dtype to the tensors a planner writes: every
// floating-point tensor (F16, BF16, F32, F64) of another dtype becomes
// the target dtype through a Transform; other tensors (integers,
// quantized types) are written as they are. tr is nil when nothing is
// cast. A value the target cannot hold (it would become ±Inf: beyond
// ±65504 for F16) is refused with lossy_conversion unless clamp is set,
// which clamps it to the target's largest finite value.
func Tensors(tensors []objects.Tensor, opts formats.WriteOptions) (out []formats.Tensor, tr []formats.Transform, err error) {
	target, err := DType(opts.DType)
	if err != nil {
		return nil, nil, err
	}
	out = make([]formats.Tensor, len(tensors))
	casters := map[string]*caster{} // by source dtype
	for i, t := range tensors {
		out[i] = formats.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Size: t.Size}
		from, ok := floatFormats[t.DType]
		if target == "" || !ok || t.DType == target {
			continue
		}
		to := floatFormats[target]
		n := t.Size / int64(from.bytes)
		out[i].DType, out[i].Size = target, n*int64(to.bytes)
		if tr == nil {
			tr = make([]formats.Transform, len(tensors))
		}
		c := casters[t.DType]
		if c == nil {
			c = newCaster(t.DType, target, opts.Clamp)
			casters[t.DType] = c
		}
		tr[i] = c.transform(t.Name)
	}
	return out, tr, nil
}

// ByChunk marks the casts of tr (Tensors' answer, as it is) as
// transforms that may be applied a chunk at a time
// (formats.Planned.ByChunk): each maps every element on its own. nil when
// nothing is cast.
func ByChunk(tr []formats.Transform) []bool {
	if tr == nil {
		return nil
	}
	out := make([]bool, len(tr))
	for i, t := range tr {
		out[i] = t != nil
	}
	return out
}

// Used is what of --dtype and --clamp acted on a planner's tensors: both
// when tr (Tensors' answer, or what the planner made of it) casts a
// tensor, neither otherwise.
func Used(o formats.WriteOptions, tr []formats.Transform) []formats.Option {
	for _, t := range tr {
		if t != nil {
			return o.Uses(formats.OptDType, formats.OptClamp)
		}
	}
	return nil
}

// caster casts values of one dtype to another, for every tensor of a
// checkout that it casts: a transform each, made apart with its formats
// and fast cast, was 180 bytes a tensor (18 MB of a plan of 100,000).
type caster struct {
	fromName, toName string
	from, to         floatFormat
	clamp            bool
	fast             func(dst, src []byte) bool // nil: value by value
}

func newCaster(fromName, toName string, clamp bool) *caster {
	return &caster{fromName: fromName, toName: toName, from: floatFormats[fromName], to: floatFormats[toName],
		clamp: clamp, fast: fastCast(fromName, toName, clamp)}
}

// transform is the cast of tensor name's bytes, which an overflow names.
func (c *caster) transform(name string) formats.Transform {
	return func(src []byte) ([]byte, error) { return c.cast(name, src) }
}

func (c *caster) cast(name string, src []byte) ([]byte, error) {
	from, to := c.from, c.to
	n := len(src) / from.bytes
	out := make([]byte, n*to.bytes)
	if c.fast != nil && c.fast(out, src[:n*from.bytes]) {
		return out, nil
	}
	// Value by value, through float64: the reference the fast casts
	// are tested against, and what reports an overflow.
	var over int
	var worst float64
	for i := range n {
		x := decodeFloat(src[i*from.bytes:], from)
		bits, overflow := castValue(x, to, c.clamp)
		if overflow {
			over++
			worst = max(worst, math.Abs(x))
		}
		putBits(out[i*to.bytes:], to.bytes, bits)
	}
	if over > 0 {
		// src may be a chunk of the tensor (formats.Planned.ByChunk):
		// the counts are of the values cast here.
		return nil, errs.New(errs.LossyConversion, "checkout",
			"tensor %q (%s) has values outside the %s range (%d among %d of its values, largest magnitude %g; %s holds at most %g): they would become infinite; pass --clamp to clamp them, or choose a wider --dtype",
			name, c.fromName, c.toName, over, n, worst, c.toName, to.max)
	}
	return out, nil
}

// castValue is x in format to: clamped to its largest finite value with
// clamp, and whether it overflowed (became infinite) otherwise.
func castValue(x float64, to floatFormat, clamp bool) (bits uint64, overflow bool) {
	if clamp && !math.IsInf(x, 0) && math.Abs(x) > to.max {
		x = math.Copysign(to.max, x)
	}
	return encodeFloat(x, to)
}

func decodeFloat(b []byte, f floatFormat) float64 {
	switch f.bytes {
	case 8:
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	case 4:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	}
	h := binary.LittleEndian.Uint16(b)
	if f.ebits == 8 { // BF16: the top half of an F32
		return float64(math.Float32frombits(uint32(h) << 16))
	}
	return decodeF16(h)
}

func decodeF16(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	switch e {
	case 0:
		return sign * math.Ldexp(m, -24)
	case 0x1f:
		if m == 0 {
			return sign * math.Inf(1)
		}
		return math.Float64frombits(uint64(h&0x8000)<<48 | 0x7ff8000000000000 | uint64(h&0x3ff)<<42)
	}
	return sign * math.Ldexp(1024+m, e-25)
}

func putBits(b []byte, n int, bits uint64) {
	switch n {
	case 8:
		binary.LittleEndian.PutUint64(b, bits)
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(bits))
	default:
		binary.LittleEndian.PutUint16(b, uint16(bits))
	}
}

// encodeFloat rounds x to format f, to nearest with ties to even, with
// subnormals. overflow reports a finite x that became infinite. A NaN
// stays a (quiet) NaN with its sign and the top bits of its payload.
func encodeFloat(x float64, f floatFormat) (bits uint64, overflow bool) {
	if f.bytes == 8 {
		return math.Float64bits(x), false
	}
	if f.bytes == 4 {
		y := float32(x) // Go rounds to nearest even
		return uint64(math.Float32bits(y)), math.IsInf(float64(y), 0) && !math.IsInf(x, 0)
	}
	var sign uint64
	if math.Signbit(x) {
		sign = 1 << (f.ebits + f.mbits)
	}
	expField := uint64(1)<<f.ebits - 1
	switch {
	case math.IsNaN(x):
		payload := math.Float64bits(x) >> (52 - f.mbits) & (1<<f.mbits - 1)
		return sign | expField<<f.mbits | 1<<(f.mbits-1) | payload, false
	case math.IsInf(x, 0):
		return sign | expField<<f.mbits, false
	case x == 0:
		return sign, false
	}
	a := math.Abs(x)
	bias := 1<<(f.ebits-1) - 1
	_, e2 := math.Frexp(a) // a = frac × 2^e2, frac in [0.5, 1)
	e := e2 - 1            // a = 1.m × 2^e
	if e < 1-bias {        // subnormal: a multiple of 2^(1-bias-mbits)
		sig := uint64(math.RoundToEven(math.Ldexp(a, int(f.mbits)-(1-bias))))
		return sign | sig, false // sig = 2^mbits is the smallest normal, correctly encoded
	}
	sig := uint64(math.RoundToEven(math.Ldexp(a, int(f.mbits)-e)))
	if sig == 1<<(f.mbits+1) {
		sig, e = sig>>1, e+1
	}
	if e > bias {
		return sign | expField<<f.mbits, true
	}
	return sign | uint64(e+bias)<<f.mbits | sig&(1<<f.mbits-1), false
}

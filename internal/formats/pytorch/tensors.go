package pytorch

import (
	"math"
	"math/bits"
	"strconv"

	"github.com/mstore/mstore/internal/errs"
)

// storage is one storage of a checkpoint: the data of archive member
// data/KEY, named by a persistent id ('storage', class, key, location,
// numel) in data.pkl.
type storage struct {
	id       int
	key      string
	m        *member
	class    *global
	dtype    string // of its elements; "U8" for an untyped storage
	elem     int64
	numel    int64
	location string

	// Set when the layout is made.
	owner  int    // the first state-dict tensor that is exactly this storage, or -1
	placed bool   // it has its place in Layout.Tensors
	index  int    // that place
	name   string // its Layout tensor's name
}

// tensor is a tensor as _rebuild_tensor* makes it: a view of a storage.
type tensor struct {
	id     int
	st     *storage
	dtype  string
	elem   int64
	offset int64 // in elements of dtype
	shape  []int64
	stride []int64 // in elements
	param  bool
}

// numel is the number of elements of a checked shape.
func numel(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// contiguous reports whether strides are row-major for shape (dimensions of
// size 1 may have any stride, as in torch's is_contiguous).
func contiguous(shape, stride []int64) bool {
	want := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] != 1 && stride[i] != want {
			return false
		}
		want *= shape[i]
	}
	return true
}

// covers reports whether t is exactly its storage: same dtype (any, over
// an untyped storage), offset 0, contiguous, and as many bytes as the
// storage.
func (t *tensor) covers() bool {
	return (t.dtype == t.st.dtype || t.st.class.untyped) && t.offset == 0 && contiguous(t.shape, t.stride) &&
		numel(t.shape)*t.elem == t.st.m.size
}

// rebuild applies one of torch's tensor-rebuilding functions to checked
// arguments.
func (m *machine) rebuild(g *global, args []value, at int) (value, error) {
	bad := func(format string, a ...any) (value, error) {
		return nil, m.fail(errs.SchemaError, at, "%s(…): "+format, append([]any{g}, a...)...)
	}
	switch g.kind {
	case kindUnsupported:
		return nil, m.fail(errs.UnsupportedVersion, at, "%s: %s", g, g.why)
	case kindRebuildFromType:
		if len(args) != 4 {
			return bad("takes 4 arguments, got %d", len(args))
		}
		fn, ok := args[0].(*global)
		if !ok || fn.kind < kindRebuild || fn.kind > kindRebuildParamState && fn.kind != kindUnsupported {
			return bad("rebuilds with a %s, not a tensor rebuild function", typeName(args[0]))
		}
		typ, ok := args[1].(*global)
		if !ok || typ.kind != kindTensorType && typ.kind != kindParameter {
			return nil, m.fail(errs.UnsupportedVersion, at, "%s(…): tensor subclass %s is not supported", g, typeName(args[1]))
		}
		inner, ok := args[2].(tuple)
		if !ok {
			return bad("arguments are a %s, not a tuple", typeName(args[2]))
		}
		if err := m.checkState(g, args[3], at); err != nil {
			return nil, err
		}
		v, err := m.rebuild(fn, inner.items, at)
		if err != nil || typ.kind != kindParameter {
			return v, err
		}
		return m.parameter(g, v, at)
	case kindRebuildParam, kindRebuildParamState:
		want := 3
		if g.kind == kindRebuildParamState {
			want = 4
		}
		if len(args) != want {
			return bad("takes %d arguments, got %d", want, len(args))
		}
		if want == 4 {
			if err := m.checkState(g, args[3], at); err != nil {
				return nil, err
			}
		}
		if _, ok := args[1].(bool); !ok {
			return bad("requires_grad is a %s, not a bool", typeName(args[1]))
		}
		if err := m.checkHooks(g, args[2], at); err != nil {
			return nil, err
		}
		return m.parameter(g, args[0], at)
	}

	// _rebuild_tensor(storage, offset, size, stride)
	// _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, backward_hooks[, metadata])
	// _rebuild_tensor_v3(storage, offset, size, stride, requires_grad, backward_hooks, dtype[, metadata])
	lo, hi := 4, 4
	switch g.kind {
	case kindRebuildV2:
		lo, hi = 6, 7
	case kindRebuildV3:
		lo, hi = 7, 8
	}
	if len(args) < lo || len(args) > hi {
		return bad("takes %d to %d arguments, got %d", lo, hi, len(args))
	}
	st, ok := args[0].(*storage)
	if !ok {
		return bad("rebuilds from a %s, not a storage", typeName(args[0]))
	}
	dtype := st.dtype
	if g.kind != kindRebuild {
		if _, ok := args[4].(bool); !ok {
			return bad("requires_grad is a %s, not a bool", typeName(args[4]))
		}
		if err := m.checkHooks(g, args[5], at); err != nil {
			return nil, err
		}
	}
	if g.kind == kindRebuildV3 {
		dt, ok := args[6].(*global)
		if !ok || dt.kind != kindDType {
			return bad("dtype is a %s, not a torch dtype", typeName(args[6]))
		}
		if dt.dtype == "" {
			return nil, m.fail(errs.UnsupportedVersion, at, "%s: %s", dt, dt.why)
		}
		if !st.class.untyped {
			return bad("rebuilds over a typed %s; torch writes an UntypedStorage here", st.class)
		}
		dtype = dt.dtype
	}
	if len(args) == hi && g.kind != kindRebuild {
		switch args[hi-1].(type) {
		case *dict, none: // tensor metadata (e.g. a parameter's flags): not data
		default:
			return bad("metadata is a %s, not a dict", typeName(args[hi-1]))
		}
	}
	return m.newTensor(g, st, dtype, args[1], args[2], args[3], at)
}

// newTensor checks a view of st: integer offset, shape and strides, none
// negative, and every element it can address inside the storage.
func (m *machine) newTensor(g *global, st *storage, dtype string, offV, sizeV, strideV value, at int) (value, error) {
	bad := func(format string, a ...any) (value, error) {
		return nil, m.fail(errs.SchemaError, at, "%s(…): "+format, append([]any{g}, a...)...)
	}
	offset, ok := offV.(int64)
	if !ok || offset < 0 {
		return bad("storage offset %v is not a non-negative int", offV)
	}
	shape, err := m.ints(g, "size", sizeV, at)
	if err != nil {
		return nil, err
	}
	stride, err := m.ints(g, "stride", strideV, at)
	if err != nil {
		return nil, err
	}
	if len(shape) != len(stride) {
		return bad("size has %d dimensions, stride %d", len(shape), len(stride))
	}
	elem := elemSizes[dtype]
	n := int64(1)
	last := offset // the highest element index the view reads
	for i, d := range shape {
		hi, lo := bits.Mul64(uint64(n), uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return bad("size %v: element count overflows", shape)
		}
		n = int64(lo)
		if d > 0 {
			hi, lo := bits.Mul64(uint64(d-1), uint64(stride[i]))
			if hi != 0 || lo > uint64(math.MaxInt64-last) {
				return bad("size %v and stride %v reach past any storage", shape, stride)
			}
			last += int64(lo)
		}
	}
	if hi, lo := bits.Mul64(uint64(n), uint64(elem)); hi != 0 || lo > math.MaxInt64 {
		return bad("size %v of %s: byte size overflows", shape, dtype)
	} else if int64(lo) > st.m.size && int64(lo) > maxRepeatedBytes {
		return nil, m.fail(errs.SizeLimitExceeded, at, "%s(…): size %v with stride %v repeats storage data/%s (%d bytes) into %d bytes, over the %d-byte limit",
			g, shape, stride, st.key, st.m.size, lo, int64(maxRepeatedBytes))
	}
	limit := st.m.size / elem // elements of dtype the storage holds
	switch {
	case n == 0 && offset > limit:
		return bad("storage offset %d is past the end of storage data/%s (%d elements)", offset, st.key, limit)
	case n > 0 && last >= limit:
		return bad("size %v, stride %v and offset %d read element %d of storage data/%s, which holds %d: the tensor lies about its size",
			shape, stride, offset, last, st.key, limit)
	}
	return &tensor{id: m.newID(), st: st, dtype: dtype, elem: elem, offset: offset, shape: shape, stride: stride}, nil
}

// ints reads a size or stride tuple: non-negative ints, at most MaxDims.
func (m *machine) ints(g *global, what string, v value, at int) ([]int64, error) {
	t, ok := v.(tuple)
	if !ok {
		return nil, m.fail(errs.SchemaError, at, "%s(…): %s is a %s, not a tuple", g, what, typeName(v))
	}
	if len(t.items) > maxDims {
		return nil, m.fail(errs.SizeLimitExceeded, at, "%s(…): %s has %d dimensions, more than %d", g, what, len(t.items), maxDims)
	}
	out := make([]int64, len(t.items))
	for i, x := range t.items {
		n, ok := x.(int64)
		if !ok || n < 0 {
			return nil, m.fail(errs.SchemaError, at, "%s(…): %s %d is %v, not a non-negative int", g, what, i, x)
		}
		out[i] = n
	}
	return out, nil
}

// checkHooks refuses backward hooks: they are callables run during
// backpropagation, and torch.save never writes any for a saved tensor.
func (m *machine) checkHooks(g *global, v value, at int) error {
	if d, ok := v.(*dict); ok && len(d.keys) == 0 {
		return nil
	}
	if _, ok := v.(none); ok {
		return nil
	}
	return m.fail(errs.SchemaError, at, "%s(…): backward_hooks must be an empty OrderedDict, got a %s", g, describe(v))
}

// checkState accepts the attribute state of a tensor or parameter (a dict,
// a pair of dicts, or None); it is checked, never applied.
func (m *machine) checkState(g *global, v value, at int) error {
	switch s := v.(type) {
	case *dict, none:
		return nil
	case tuple:
		ok := len(s.items) <= 3
		for _, x := range s.items {
			switch x.(type) {
			case *dict, none:
			default:
				ok = false
			}
		}
		if ok {
			return nil
		}
	}
	return m.fail(errs.SchemaError, at, "%s(…): state is a %s, not a dict of attributes", g, typeName(v))
}

// parameter wraps a rebuilt tensor as a Parameter: the same view.
func (m *machine) parameter(g *global, v value, at int) (value, error) {
	t, ok := v.(*tensor)
	if !ok {
		return nil, m.fail(errs.SchemaError, at, "%s(…) wraps a %s, not a tensor", g, typeName(v))
	}
	p := *t
	p.id, p.param = m.newID(), true
	return &p, nil
}

func describe(v value) string {
	if d, ok := v.(*dict); ok {
		return "dict of " + strconv.Itoa(len(d.keys)) + " entries"
	}
	return typeName(v)
}

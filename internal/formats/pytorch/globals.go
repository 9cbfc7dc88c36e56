package pytorch

import (
	"fmt"

	"github.com/mstore/mstore/internal/errs"
)

// globalKind says what an allowed global is to the unpickler. The zero
// value is invalid.
type globalKind int

const (
	_ globalKind = iota
	kindDictType
	kindParameter
	kindTensorType
	kindSize
	kindDevice
	kindEncode
	kindByteArray
	kindSet
	kindComplex
	kindDType
	kindStorageType
	kindRebuild   // torch._utils._rebuild_tensor
	kindRebuildV2 // torch._utils._rebuild_tensor_v2
	kindRebuildV3 // torch._utils._rebuild_tensor_v3
	kindRebuildParam
	kindRebuildParamState
	kindRebuildFromType
	kindUnsupported // allowed by torch's safe loader, not read by mstore
)

// global is a name the pickle may refer to. It is only ever a key into the
// allowlist: nothing is imported.
type global struct {
	module, name string
	kind         globalKind
	dtype        string // dtypes and storage types: mstore's dtype name, "" when unsupported
	untyped      bool   // torch.storage.UntypedStorage
	why          string // kindUnsupported, and dtypes mstore cannot hold
}

func (g *global) String() string { return g.module + "." + g.name }

// torchDTypes maps torch's dtype names to mstore's (SafeTensors' where it
// has one).
var torchDTypes = map[string]string{
	"float32": "F32", "float64": "F64", "float16": "F16", "bfloat16": "BF16",
	"int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL",
	"uint16": "U16", "uint32": "U32", "uint64": "U64",
	"complex32": "C32", "complex64": "C64", "complex128": "C128",
	"float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "float8_e8m0fnu": "F8_E8M0",
	"float8_e4m3fnuz": "F8_E4M3FNUZ", "float8_e5m2fnuz": "F8_E5M2FNUZ",
}

// elemSizes is the byte width of each dtype mstore reads from checkpoints.
var elemSizes = map[string]int64{
	"F32": 4, "F64": 8, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
	"U16": 2, "U32": 4, "U64": 8, "C32": 4, "C64": 8, "C128": 16,
	"F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "F8_E4M3FNUZ": 1, "F8_E5M2FNUZ": 1,
}

// ElementSize returns the width in bytes of one element of dtype, for the
// dtypes a checkpoint can hold.
func ElementSize(dtype string) (int64, bool) {
	n, ok := elemSizes[dtype]
	return n, ok
}

// legacyStorages maps torch's typed storage classes to dtypes.
var legacyStorages = map[string]string{
	"FloatStorage": "F32", "DoubleStorage": "F64", "HalfStorage": "F16", "BFloat16Storage": "BF16",
	"LongStorage": "I64", "IntStorage": "I32", "ShortStorage": "I16", "CharStorage": "I8",
	"ByteStorage": "U8", "BoolStorage": "BOOL", "ComplexFloatStorage": "C64", "ComplexDoubleStorage": "C128",
}

// storageClass is the torch storage class written for a dtype (the
// inverse of legacyStorages), or "" for dtypes saved with
// _rebuild_tensor_v3 over an untyped storage.
func storageClass(dtype string) string {
	for cls, dt := range legacyStorages {
		if dt == dtype {
			return cls
		}
	}
	return ""
}

// torchName returns torch's name of an mstore dtype.
func torchName(dtype string) (string, bool) {
	for name, dt := range torchDTypes {
		if dt == dtype {
			return name, true
		}
	}
	return "", false
}

// allowed is the allowlist: the globals torch.load(weights_only=True)
// accepts (torch/_weights_only_unpickler.py, _get_allowed_globals), each
// with what mstore does with it. Everything else is refused by name.
var allowed = func() map[string]*global {
	m := map[string]*global{}
	add := func(g *global) { m[g.String()] = g }
	add(&global{module: "collections", name: "OrderedDict", kind: kindDictType})
	add(&global{module: "collections", name: "Counter", kind: kindDictType})
	add(&global{module: "torch.nn.parameter", name: "Parameter", kind: kindParameter})
	add(&global{module: "torch", name: "Tensor", kind: kindTensorType})
	add(&global{module: "torch", name: "Size", kind: kindSize})
	add(&global{module: "torch", name: "device", kind: kindDevice})
	add(&global{module: "_codecs", name: "encode", kind: kindEncode})
	add(&global{module: "builtins", name: "bytearray", kind: kindByteArray})
	add(&global{module: "builtins", name: "set", kind: kindSet})
	add(&global{module: "builtins", name: "complex", kind: kindComplex})
	for name, dt := range torchDTypes {
		add(&global{module: "torch", name: name, kind: kindDType, dtype: dt})
	}
	unsupportedDTypes := []string{"qint8", "quint8", "qint32", "quint4x2", "quint2x4", "bits8", "bits16",
		"bits1x8", "bits2x4", "bits4x2", "float4_e2m1fn_x2"}
	for i := 1; i < 8; i++ {
		unsupportedDTypes = append(unsupportedDTypes, fmt.Sprintf("uint%d", i), fmt.Sprintf("int%d", i))
	}
	for _, name := range unsupportedDTypes {
		add(&global{module: "torch", name: name, kind: kindDType, why: "tensors of dtype torch." + name + " are not supported"})
	}
	for cls, dt := range legacyStorages {
		add(&global{module: "torch", name: cls, kind: kindStorageType, dtype: dt})
	}
	for _, cls := range []string{"QUInt8Storage", "QInt8Storage", "QInt32Storage", "QUInt4x2Storage", "QUInt2x4Storage"} {
		add(&global{module: "torch", name: cls, kind: kindStorageType, why: "quantized storages are not supported"})
	}
	add(&global{module: "torch.storage", name: "UntypedStorage", kind: kindStorageType, dtype: "U8", untyped: true})
	add(&global{module: "torch.storage", name: "TypedStorage", kind: kindStorageType, why: "a bare TypedStorage class names no dtype"})
	for _, cls := range []string{"Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool",
		"ComplexFloat", "ComplexDouble"} {
		add(&global{module: "torch", name: cls + "Tensor", kind: kindUnsupported, why: "legacy tensor type constructors are not supported"})
	}
	for _, q := range []string{"per_tensor_affine", "per_tensor_symmetric", "per_channel_affine", "per_channel_symmetric",
		"per_channel_affine_float_qparams"} {
		add(&global{module: "torch", name: q, kind: kindUnsupported, why: "quantized tensors are not supported"})
	}
	add(&global{module: "torch._utils", name: "_rebuild_tensor", kind: kindRebuild})
	add(&global{module: "torch._utils", name: "_rebuild_tensor_v2", kind: kindRebuildV2})
	add(&global{module: "torch._utils", name: "_rebuild_tensor_v3", kind: kindRebuildV3})
	add(&global{module: "torch._utils", name: "_rebuild_parameter", kind: kindRebuildParam})
	add(&global{module: "torch._utils", name: "_rebuild_parameter_with_state", kind: kindRebuildParamState})
	add(&global{module: "torch._tensor", name: "_rebuild_from_type_v2", kind: kindRebuildFromType})
	for name, why := range map[string]string{
		"_rebuild_qtensor":                       "quantized tensors are not supported",
		"_rebuild_sparse_tensor":                 "sparse tensors are not supported",
		"_rebuild_meta_tensor_no_storage":        "meta tensors hold no data",
		"_rebuild_wrapper_subclass":              "tensor subclasses are not supported",
		"_rebuild_device_tensor_from_numpy":      "tensors rebuilt from numpy arrays are not supported",
		"_rebuild_device_tensor_from_cpu_tensor": "device-only tensors are not supported",
		"_rebuild_nested_tensor":                 "nested tensors are not supported",
	} {
		add(&global{module: "torch._utils", name: name, kind: kindUnsupported, why: why})
	}
	add(&global{module: "torch.serialization", name: "_get_layout", kind: kindUnsupported, why: "sparse tensors are not supported"})
	return m
}()

// lookupGlobal resolves GLOBAL module.name. Python 2 module names are
// mapped as torch maps them.
func lookupGlobal(module, name string) (*global, error) {
	switch module {
	case "__builtin__":
		module = "builtins"
	case "copy_reg":
		module = "copyreg"
	}
	if g, ok := allowed[module+"."+name]; ok {
		return g, nil
	}
	return nil, errs.New(errs.SchemaError, pkg,
		"global %s.%s is not allowed: mstore, like torch.load(weights_only=True), only builds tensors, storages, dtypes and plain containers, and never imports or calls anything else", module, name)
}

// reduce applies REDUCE: fn(*args) for the few callables of the allowlist.
func (m *machine) reduce(fn, argsV value, at int) (value, error) {
	g, ok := fn.(*global)
	if !ok {
		return nil, m.fail(errs.SchemaError, at, "REDUCE calls a %s, which is not a function", typeName(fn))
	}
	targs, ok := argsV.(tuple)
	if !ok {
		return nil, m.fail(errs.SchemaError, at, "REDUCE of %s with a %s for arguments, not a tuple", g, typeName(argsV))
	}
	args := targs.items
	bad := func(format string, a ...any) (value, error) {
		return nil, m.fail(errs.SchemaError, at, "%s(…): "+format, append([]any{g}, a...)...)
	}
	switch g.kind {
	case kindUnsupported:
		return nil, m.fail(errs.UnsupportedVersion, at, "%s: %s", g, g.why)
	case kindDictType:
		d := newDict(m.newID())
		if len(args) == 0 {
			return d, nil
		}
		if src, ok := args[0].(*dict); ok && len(args) == 1 {
			for i := range src.keys {
				if err := d.set(src.keys[i], src.vals[i], m.lim.MaxDepth, m.budget); err != nil {
					return nil, m.wrap(err, at)
				}
			}
			return d, nil
		}
		return bad("takes no arguments or one dict")
	case kindParameter:
		if len(args) < 1 || len(args) > 2 {
			return bad("takes a tensor and requires_grad")
		}
		return m.parameter(g, args[0], at)
	case kindSize:
		if len(args) != 1 {
			return bad("takes one tuple")
		}
		t, ok := args[0].(tuple)
		if !ok {
			return bad("takes a tuple, not a %s", typeName(args[0]))
		}
		for _, v := range t.items {
			if _, ok := v.(int64); !ok {
				return bad("holds a %s, not an int", typeName(v))
			}
		}
		return t, nil
	case kindDevice:
		if len(args) == 0 {
			return bad("takes a device name")
		}
		if s, ok := args[0].(string); ok && len(args) == 1 {
			return device(s), nil
		}
		if s, ok := args[0].(string); ok && len(args) == 2 {
			if i, ok := args[1].(int64); ok {
				return device(fmt.Sprintf("%s:%d", s, i)), nil
			}
		}
		return bad("takes a device name")
	case kindEncode, kindByteArray:
		return m.encode(g, args, at)
	case kindSet:
		s := &set{id: m.newID(), depth: 1}
		if len(args) == 0 {
			return s, nil
		}
		var items []value
		switch src := args[0].(type) {
		case *list:
			items = src.items
		case tuple:
			items = src.items
		default:
			return bad("takes a list")
		}
		for _, v := range items {
			h, err := hashKey(v, m.lim.MaxDepth, m.budget)
			if err == nil { // charged, though not kept: the next item's spelling then stops sooner
				err = m.budget.Charge(int64(len(h)))
			}
			if err != nil {
				return nil, m.wrap(err, at)
			}
			s.depth = max(s.depth, depthOf(v)+1)
		}
		s.items = append(s.items, items...)
		return s, nil
	case kindComplex:
		var parts [2]float64
		if len(args) > 2 {
			return bad("takes at most two numbers")
		}
		for i, v := range args {
			switch v := v.(type) {
			case int64:
				parts[i] = float64(v)
			case float64:
				parts[i] = v
			case bool:
				if v {
					parts[i] = 1
				}
			default:
				return bad("takes numbers, not a %s", typeName(v))
			}
		}
		return complexNum{parts[0], parts[1]}, nil
	case kindRebuild, kindRebuildV2, kindRebuildV3, kindRebuildParam, kindRebuildParamState, kindRebuildFromType:
		return m.rebuild(g, args, at)
	}
	return nil, m.fail(errs.SchemaError, at, "%s cannot be called", g)
}

// encode is _codecs.encode(str, "latin1"), which is how protocol 2 writes
// bytes, and bytearray(…).
func (m *machine) encode(g *global, args []value, at int) (value, error) {
	if g.kind == kindByteArray {
		switch {
		case len(args) == 0:
			return []byte{}, nil
		case len(args) == 1:
			if b, ok := args[0].([]byte); ok {
				return append([]byte{}, b...), nil
			}
		}
	}
	if len(args) == 2 {
		s, ok1 := args[0].(string)
		enc, ok2 := args[1].(string)
		if ok1 && ok2 && (enc == "latin1" || enc == "latin-1" || enc == "iso-8859-1") {
			b := make([]byte, 0, len(s))
			for _, r := range s {
				if r > 0xff {
					return nil, m.fail(errs.SchemaError, at, "%s: character %U is not latin-1", g, r)
				}
				b = append(b, byte(r))
			}
			return b, nil
		}
	}
	return nil, m.fail(errs.SchemaError, at, "%s(…) takes a string and \"latin1\"", g)
}

// newObj applies NEWOBJ: cls.__new__(cls, *args), for empty containers and
// parameters only.
func (m *machine) newObj(cls, argsV value, at int) (value, error) {
	g, ok := cls.(*global)
	if !ok {
		return nil, m.fail(errs.SchemaError, at, "NEWOBJ of a %s, which is not a class", typeName(cls))
	}
	args, ok := argsV.(tuple)
	if !ok {
		return nil, m.fail(errs.SchemaError, at, "NEWOBJ of %s with a %s for arguments, not a tuple", g, typeName(argsV))
	}
	switch {
	case g.kind == kindDictType && len(args.items) == 0:
		return newDict(m.newID()), nil
	case g.kind == kindSet && len(args.items) == 0:
		return &set{id: m.newID(), depth: 1}, nil
	case g.kind == kindParameter && len(args.items) >= 1 && len(args.items) <= 2:
		return m.parameter(g, args.items[0], at)
	}
	return nil, m.fail(errs.SchemaError, at, "NEWOBJ of %s with %d arguments is not allowed", g, len(args.items))
}

// build applies BUILD. torch's safe loader lets it set attributes of an
// OrderedDict (a state_dict's _metadata, which holds module versions):
// mstore checks that the state is a dict and keeps nothing of it.
func (m *machine) build(inst, state value, at int) error {
	if _, ok := inst.(*dict); !ok {
		return m.fail(errs.SchemaError, at, "BUILD on a %s is not allowed: only a dict's attributes may be set", typeName(inst))
	}
	switch s := state.(type) {
	case *dict, none:
		return nil
	case tuple:
		if len(s.items) == 2 {
			_, ok1 := s.items[0].(*dict)
			_, ok2 := s.items[1].(*dict)
			_, none1 := s.items[0].(none)
			_, none2 := s.items[1].(none)
			if (ok1 || none1) && (ok2 || none2) {
				return nil
			}
		}
	}
	return m.fail(errs.SchemaError, at, "BUILD state of a dict is a %s, not a dict of attributes", typeName(state))
}

package onnx

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/mstore/mstore/internal/errs"
)

// dataKind says where a TensorProto's bytes are.
type dataKind int

const (
	_         dataKind = iota
	inRaw              // raw_data
	inFloats           // packed float_data (FLOAT, COMPLEX64): little-endian fixed32s
	inDoubles          // packed double_data (DOUBLE, COMPLEX128): little-endian fixed64s
	external           // a range of an external data file
	// inFrame: the data is in varint fields (int32_data, int64_data,
	// uint64_data), string_data, unpacked floats, or absent; those bytes
	// are not the tensor's and stay in the frame.
	inFrame
)

// tensorRec is one TensorProto.
type tensorRec struct {
	protoName   string // TensorProto.name
	local       string // the name the walker gives it (doc.go)
	scope       scope
	name        string // unique in the layout
	initializer bool
	dataType    int64
	dims        []int64
	size        int64
	kind        dataKind
	at          int64   // the TensorProto's body, for errors
	dataAt      int64   // inRaw, inFloats, inDoubles: the bytes' offset in the .onnx
	ext         *extRef // external
	fields      []span  // every field, for the planner
}

// dtype is the tensor's layout dtype.
func (t *tensorRec) dtype() string { return dtypes[t.dataType].name }

// tensor reads the TensorProto in field f.
func (w *walker) tensor(f field, depth int) (*tensorRec, *node, error) {
	if err := w.expect(f, protowire.BytesType, "tensor"); err != nil {
		return nil, nil, err
	}
	if depth > MaxDepth {
		return nil, nil, w.fail(errs.SizeLimitExceeded, f.at, "messages nested more than %d deep", MaxDepth)
	}
	rec := &tensorRec{at: f.val}
	var raw, floats, doubles []field
	var frameData, location bool
	var entries []field
	err := w.fields(f.val, f.end, func(g field) error {
		rec.fields = append(rec.fields, span{num: g.num, at: g.at, end: g.end})
		var err error
		switch g.num {
		case tensorDims:
			err = w.dims(rec, g)
		case tensorDataType:
			err = w.expect(g, protowire.VarintType, "data_type")
			rec.dataType = int64(g.v)
			if err == nil && g.v > maxKnownType {
				err = w.fail(errs.UnsupportedVersion, g.at, "data_type %d is newer than this build knows (up to %d)", int64(g.v), maxKnownType)
			}
		case tensorSegment:
			err = w.fail(errs.UnsupportedVersion, g.at, "segmented tensors are not supported")
		case tensorName:
			rec.protoName, err = w.str(g, "tensor name")
		case tensorRawData:
			err = w.expect(g, protowire.BytesType, "raw_data")
			raw = append(raw, g)
		case tensorFloatData:
			if g.typ == protowire.BytesType {
				floats = append(floats, g)
			} else {
				frameData = true
			}
		case tensorDoubleData:
			if g.typ == protowire.BytesType {
				doubles = append(doubles, g)
			} else {
				frameData = true
			}
		case tensorInt32Data, tensorInt64Data, tensorUint64Data, tensorStringData:
			frameData = true
		case tensorExternalData:
			err = w.expect(g, protowire.BytesType, "external_data")
			entries = append(entries, g)
		case tensorDataLocation:
			err = w.expect(g, protowire.VarintType, "data_location")
			if g.v > 1 {
				err = w.fail(errs.SchemaError, g.at, "data_location %d is neither DEFAULT (0) nor EXTERNAL (1)", g.v)
			}
			location = g.v == 1
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if err := w.placeData(rec, raw, floats, doubles, frameData, location, entries); err != nil {
		return nil, nil, err
	}
	return rec, &node{tagAt: f.at, tagEnd: f.tagEnd, bodyAt: f.val, end: f.end}, nil
}

// dims reads TensorProto.dims, packed or not.
func (w *walker) dims(rec *tensorRec, g field) error {
	switch g.typ {
	case protowire.VarintType:
		rec.dims = append(rec.dims, int64(g.v))
	case protowire.BytesType:
		b, err := w.bytes(g, "dims")
		if err != nil {
			return err
		}
		for len(b) > 0 {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return w.fail(errs.InvalidArchive, g.val, "dims: bad varint: %v", protowire.ParseError(n))
			}
			rec.dims = append(rec.dims, int64(v))
			b = b[n:]
			if len(rec.dims) > MaxDims {
				break
			}
		}
	default:
		return w.expect(g, protowire.VarintType, "dims")
	}
	if len(rec.dims) > MaxDims {
		return w.fail(errs.SizeLimitExceeded, g.at, "more than %d dims", MaxDims)
	}
	return nil
}

// placeData decides where rec's bytes are and checks that they are
// exactly as many as its dims and data_type say.
func (w *walker) placeData(rec *tensorRec, raw, floats, doubles []field, frameData, location bool, entries []field) error {
	fields := len(raw) + len(floats) + len(doubles)
	if frameData {
		fields++
	}
	switch {
	case location:
		if fields > 0 {
			return w.fail(errs.SchemaError, rec.at, "tensor %q is stored externally and also holds data", rec.protoName)
		}
		ext, err := w.externalRef(entries)
		if err != nil {
			return err
		}
		rec.kind, rec.ext = external, ext
	case len(entries) > 0:
		return w.fail(errs.SchemaError, rec.at, "tensor %q has external_data but its data_location is not EXTERNAL", rec.protoName)
	case fields > 1:
		return w.fail(errs.SchemaError, rec.at, "tensor %q holds its data in more than one field", rec.protoName)
	case len(raw) == 1:
		if rec.dataType == typeString {
			return w.fail(errs.SchemaError, rec.at, "tensor %q: STRING data cannot be raw_data", rec.protoName)
		}
		rec.kind, rec.dataAt = inRaw, raw[0].val
	case len(floats) == 1:
		if rec.dataType != typeFloat && rec.dataType != typeComplex64 {
			return w.fail(errs.SchemaError, rec.at, "tensor %q: float_data holds data_type %d", rec.protoName, rec.dataType)
		}
		rec.kind, rec.dataAt = inFloats, floats[0].val
	case len(doubles) == 1:
		if rec.dataType != typeDouble && rec.dataType != typeComplex128 {
			return w.fail(errs.SchemaError, rec.at, "tensor %q: double_data holds data_type %d", rec.protoName, rec.dataType)
		}
		rec.kind, rec.dataAt = inDoubles, doubles[0].val
	default:
		rec.kind = inFrame
		return nil
	}
	size, err := tensorSize(rec.dataType, rec.dims)
	if err != nil {
		return locate(err, w.path, rec.at)
	}
	rec.size = size
	var have int64
	switch rec.kind {
	case external:
		if !rec.ext.hasLength {
			return nil
		}
		have = rec.ext.length
	case inRaw:
		have = raw[0].end - raw[0].val
	case inFloats:
		have = floats[0].end - floats[0].val
	case inDoubles:
		have = doubles[0].end - doubles[0].val
	}
	if have != size {
		return w.fail(errs.SchemaError, rec.at, "tensor %q holds %d bytes, its dims %v of %s need %d", rec.protoName, have, rec.dims, rec.dtype(), size)
	}
	return nil
}

// span is where a field of a TensorProto lies.
type span struct {
	num     protowire.Number
	at, end int64
}

// dropped reports whether the planner leaves field g of rec out: the
// fields that say where the data is, which it writes anew.
func (rec *tensorRec) dropped(g span) bool {
	switch g.num {
	case tensorRawData, tensorExternalData, tensorDataLocation:
		return true
	case tensorFloatData:
		return rec.kind == inFloats
	case tensorDoubleData:
		return rec.kind == inDoubles
	}
	return false
}

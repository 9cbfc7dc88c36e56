package pytorch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"

	"github.com/mstore/mstore/internal/errs"
)

// MetaKey is the File.Meta key under which a checkpoint keeps what its
// Layout tensors alone do not say: its views, its storages that are no
// single tensor, and its values that are not tensors. A checkpoint whose
// every tensor is its own storage, and that holds nothing else, has no
// Meta at all.
const MetaKey = "pytorch"

// FileMeta is the content of a checkpoint's Meta, canonical JSON.
type FileMeta struct {
	// Views are the state-dict tensors that are not their storage's Layout
	// tensor: views into a larger storage, strided (non-contiguous) tensors,
	// and the second name of a shared tensor.
	Views []View `json:"views,omitempty"`
	// Storages names the file's Layout tensors that are bare storages
	// ("<storage:FILE/data/KEY>"), not a state-dict tensor.
	Storages []string `json:"storages,omitempty"`
	// Other counts the values that are not tensors (an epoch, a learning
	// rate, a config string), with the first few names.
	Other *Other `json:"other,omitempty"`
}

// View is a state-dict tensor read out of a stored storage.
type View struct {
	Name string `json:"name"`
	// At is its position among the file's state-dict tensors, in the
	// checkpoint's order; the file's other state-dict tensors are its Layout
	// tensors that are not bare storages, in Layout order, in the remaining
	// positions.
	At      int     `json:"at"`
	Storage string  `json:"storage"` // the Layout tensor that holds its bytes
	DType   string  `json:"dtype"`
	Shape   []int64 `json:"shape"`
	Stride  []int64 `json:"stride"` // in elements
	Offset  int64   `json:"offset"` // in elements
}

// Other describes a checkpoint's values that are not tensors.
type Other struct {
	Count int      `json:"count"`
	Names []string `json:"names"` // the first few, in order
}

func (fm *FileMeta) empty() bool {
	return len(fm.Views) == 0 && len(fm.Storages) == 0 && fm.Other == nil
}

// encode returns the File.Meta of fm, nil when it says nothing.
func (fm *FileMeta) encode() map[string]string {
	if fm.empty() {
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(fm); err != nil {
		panic(err) // plain data: cannot fail
	}
	return map[string]string{MetaKey: string(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))}
}

// DecodeMeta reads a checkpoint's File.Meta; a file without one has no
// views, no bare storages and nothing but tensors.
func DecodeMeta(meta map[string]string) (*FileMeta, error) {
	fm := &FileMeta{}
	s, ok := meta[MetaKey]
	if !ok {
		return fm, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(fm); err != nil {
		return nil, errs.Wrap(errs.IntegrityError, pkg, err, "the manifest's checkpoint metadata does not parse")
	}
	for _, v := range fm.Views {
		if _, err := v.Size(); err != nil {
			return nil, err
		}
	}
	return fm, nil
}

// Size is the byte size of the view made contiguous.
func (v View) Size() (int64, error) {
	elem, ok := elemSizes[v.DType]
	if !ok {
		return 0, errs.New(errs.UnsupportedVersion, pkg, "view %q has dtype %q", v.Name, v.DType)
	}
	if len(v.Shape) != len(v.Stride) || v.Offset < 0 {
		return 0, errs.New(errs.IntegrityError, pkg, "view %q: shape %v, stride %v, offset %d", v.Name, v.Shape, v.Stride, v.Offset)
	}
	n := elem
	for i, d := range v.Shape {
		hi, lo := bits.Mul64(uint64(n), uint64(d))
		if d < 0 || v.Stride[i] < 0 || hi != 0 || lo > math.MaxInt64 {
			return 0, errs.New(errs.IntegrityError, pkg, "view %q: shape %v, stride %v", v.Name, v.Shape, v.Stride)
		}
		n = int64(lo)
	}
	return n, nil
}

// Contiguous reports whether the view is one run of its storage's bytes,
// which Gather then returns as a slice.
func (v View) Contiguous() bool { return contiguous(v.Shape, v.Stride) }

// Gather copies the view's elements out of its storage's bytes, in
// row-major order: what torch's .contiguous() holds.
func (v View) Gather(st []byte) ([]byte, error) {
	size, err := v.Size()
	if err != nil {
		return nil, err
	}
	elem := elemSizes[v.DType]
	if size == 0 {
		return []byte{}, nil
	}
	last := v.Offset
	for i, d := range v.Shape {
		hi, lo := bits.Mul64(uint64(d-1), uint64(v.Stride[i]))
		if hi != 0 || lo > uint64(math.MaxInt64-last) {
			return nil, errs.New(errs.IntegrityError, pkg, "view %q: stride %v reaches past any storage", v.Name, v.Stride)
		}
		last += int64(lo)
	}
	if last >= int64(len(st))/elem {
		return nil, errs.New(errs.IntegrityError, pkg, "view %q reads past its %d-byte storage", v.Name, len(st))
	}
	if v.Contiguous() {
		return append([]byte{}, st[v.Offset*elem:v.Offset*elem+size]...), nil
	}
	// Copy runs along the last dimension when it is dense, else elements.
	dims, run := len(v.Shape), elem
	if dims > 0 && v.Stride[dims-1] == 1 {
		dims, run = dims-1, v.Shape[dims-1]*elem
	}
	out := make([]byte, 0, size)
	idx := make([]int64, dims)
	for {
		at := v.Offset
		for i, x := range idx {
			at += x * v.Stride[i]
		}
		out = append(out, st[at*elem:at*elem+run]...)
		i := dims - 1
		for ; i >= 0; i-- {
			idx[i]++
			if idx[i] < v.Shape[i] {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			break
		}
	}
	if int64(len(out)) != size {
		return nil, fmt.Errorf("pytorch: gathered %d bytes of view %q, want %d", len(out), v.Name, size)
	}
	return out, nil
}

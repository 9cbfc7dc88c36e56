package npz

import (
	"encoding/json"
	"path"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/cast"
	"github.com/mstore/mstore/internal/formats/zipfile"
	"github.com/mstore/mstore/internal/objects"
)

// DefaultName is the file name (without .npz) a conversion writes.
const DefaultName = "model"

// Honours: an .npz is one file of arrays; only --dtype shapes it, and what
// it cannot keep beside them is left out with --drop-non-tensors.
func (codec) Honours() []formats.Option {
	return []formats.Option{formats.OptDType, formats.OptClamp, formats.OptDropNonTensors}
}

// Extensions are stripped from an added file's name for its ref name.
func (codec) Extensions() []string { return []string{".npz", ".npy"} }

// Export names a checkout of NumPy arrays in another format after the
// first file. The arrays are all there is: nothing else is carried or lost.
func (codec) Export(req formats.PlanRequest, _ string, _ bool) (*formats.Export, error) {
	for _, f := range req.Source.Files {
		if f.Role == objects.RoleContainer {
			return &formats.Export{Name: strings.TrimSuffix(f.Path, path.Ext(f.Path))}, nil
		}
	}
	return &formats.Export{}, nil
}

// Expand lists the arrays as a re-layout writes them, in C order: an
// array stored in Fortran order is read out transposed.
func (codec) Expand(m *objects.Manifest, _ formats.WriteOptions) ([]formats.Expanded, error) {
	fortran := map[string]bool{}
	for _, f := range m.Files {
		if s := f.Meta[MetaFortran]; s != "" {
			var names []string
			if err := json.Unmarshal([]byte(s), &names); err != nil {
				return nil, errs.Wrap(errs.IntegrityError, pkg, err, "%s: the manifest's %s", f.Path, MetaFortran)
			}
			for _, n := range names {
				fortran[n] = true
			}
		}
	}
	out := make([]formats.Expanded, len(m.Tensors))
	for i, t := range m.Tensors {
		if !fortran[t.Name] || t.Size == 0 {
			out[i] = formats.Expanded{Tensor: t}
			continue
		}
		size, err := elemSize(t)
		if err != nil {
			return nil, err
		}
		st, shape := t, t.Shape
		out[i] = formats.Expanded{Tensor: objects.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Size: t.Size}, From: &st,
			Read: func(src []byte) ([]byte, error) { return fromFortran(src, shape, size) }}
	}
	return out, nil
}

// sizeIs reports whether elements of n bytes in shape make size bytes.
func sizeIs(n int64, shape []int64, size int64) bool {
	for _, d := range shape {
		if d != 0 && n > size/d+1 {
			return false
		}
		n *= d
	}
	return n == size
}

// elemSize is the width of one element of t.
func elemSize(t objects.Tensor) (int64, error) {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	if n == 0 || t.Size%n != 0 {
		return 0, errs.New(errs.IntegrityError, pkg, "tensor %q: %d bytes do not divide into its shape %v", t.Name, t.Size, t.Shape)
	}
	return t.Size / n, nil
}

// fromFortran turns column-major data of shape into row-major.
func fromFortran(src []byte, shape []int64, size int64) ([]byte, error) {
	out := make([]byte, len(src))
	nd := len(shape)
	stride := make([]int64, nd) // column-major strides, in elements
	s := int64(1)
	for k := 0; k < nd; k++ {
		stride[k] = s
		s *= shape[k]
	}
	if s*size != int64(len(src)) {
		return nil, errs.New(errs.IntegrityError, pkg, "a Fortran-order array of shape %v is %d bytes, not %d", shape, len(src), s*size)
	}
	idx := make([]int64, nd)
	for o := int64(0); o < s; o++ {
		var in int64
		for k := range nd {
			in += idx[k] * stride[k]
		}
		copy(out[o*size:(o+1)*size], src[in*size:(in+1)*size])
		for k := nd - 1; k >= 0; k-- { // row-major: the last index moves fastest
			if idx[k]++; idx[k] < shape[k] {
				break
			}
			idx[k] = 0
		}
	}
	return out, nil
}

// PlanCheckout writes the tensors as numpy.savez does: one stored .npz,
// each tensor a C-order v1 .npy member NAME.npy. A tensor whose dtype
// NumPy lacks (BF16, FP8, quantized types) is lossy_conversion (--dtype
// f32 casts BF16).
func (codec) PlanCheckout(req formats.PlanRequest) (*formats.Planned, error) {
	name := DefaultName
	if req.Source.Format == Codec.Name() {
		for _, f := range req.Source.Files {
			if f.Role == objects.RoleContainer {
				name = strings.TrimSuffix(f.Path, path.Ext(f.Path))
				break
			}
		}
	} else if req.From != nil && req.From.Name != "" {
		name = req.From.Name
	}
	if len(req.Tensors) == 0 { // a vocabulary-only GGUF: numpy.savez of nothing, which no reader wants
		return nil, errs.New(errs.SchemaError, "checkout", "the version has no tensors, and an .npz of no arrays holds nothing; check it out in a format with metadata (gguf, safetensors)")
	}
	in, tr, err := cast.Tensors(req.Tensors, req.Options)
	if err != nil {
		return nil, err
	}
	var lacking []objects.Tensor
	for i, t := range in {
		if _, ok := descrOf(t.DType); !ok {
			lacking = append(lacking, req.Tensors[i])
		}
	}
	if len(lacking) > 0 {
		return nil, errs.New(errs.LossyConversion, "checkout",
			"NumPy has no dtype for %d tensors: %s (NumPy has no bfloat16 or 8-bit floats: pass --dtype f32, or leave them out with --tensors)",
			len(lacking), formats.DescribeDTypes(lacking))
	}
	l, err := Plan(in, name)
	if err != nil {
		return nil, err
	}
	return &formats.Planned{Layout: l, Transforms: tr, ByChunk: cast.ByChunk(tr), Used: cast.Used(req.Options, tr)}, nil
}

// Plan lays tensors out as NAME.npz, without I/O.
func Plan(tensors []formats.Tensor, name string) (*formats.Layout, error) {
	file := name + ".npz"
	if !formats.IsMemberPath(file) {
		return nil, errs.New(errs.PathTraversal, pkg, "plan: name %q is not a clean relative path", name)
	}
	l := &formats.Layout{Format: Codec.Name(), Tensors: make([]formats.Tensor, len(tensors))}
	w := &zipfile.Writer{SizesInLocal: true}
	w.Expect(len(tensors))
	seen := make(map[string]bool, len(tensors))
	for i, t := range tensors {
		descr, ok := descrOf(t.DType)
		if !ok {
			return nil, errs.New(errs.UnsupportedVersion, pkg, "plan: NumPy has no dtype %q", t.DType)
		}
		if n, err := itemSize(descr); err != nil || !sizeIs(n, t.Shape, t.Size) {
			return nil, errs.New(errs.SchemaError, pkg, "plan: tensor %q is %d bytes, not what %s × %v make", t.Name, t.Size, descr, t.Shape)
		}
		member := t.Name + ".npy"
		if !formats.IsMemberPath(member) || seen[member] {
			return nil, errs.New(errs.SchemaError, pkg, "plan: tensor %q cannot be an .npz member name (not a clean relative path, or twice)", t.Name)
		}
		seen[member] = true
		t.Shape = append([]int64{}, t.Shape...)
		l.Tensors[i] = t
		w.AddTensorAfter(member, npyHeader(descr, t.Shape), i, t.Size)
	}
	l.Files = []formats.File{w.Finish(file)}
	return l, nil
}

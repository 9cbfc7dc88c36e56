package formattest

import (
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
)

// The helpers every codec's tests share: tensors to generate, their
// deterministic contents, a planned model written out, and the body of a
// fuzz target.

// Spec is a tensor to generate; its bytes are Content(Name, size).
type Spec struct {
	Name  string
	DType string
	Shape []int64
}

// SizeFunc is a codec's size of a dtype and shape (safetensors.TensorSize,
// gguf.TensorSize).
type SizeFunc func(dtype string, shape []int64) (int64, error)

// Tensor is the spec as a layout tensor, sized by sizeOf.
func (s Spec) Tensor(t testing.TB, sizeOf SizeFunc) formats.Tensor {
	t.Helper()
	size, err := sizeOf(s.DType, s.Shape)
	if err != nil {
		t.Fatalf("spec %s: %v", s.Name, err)
	}
	return formats.Tensor{Name: s.Name, DType: s.DType, Shape: s.Shape, Size: size}
}

// Content is deterministic bytes for a tensor, a function of its name, so
// that two tensors never share bytes by accident.
func Content(name string, size int64) []byte {
	b := make([]byte, size)
	h := uint32(2166136261)
	for i := range len(name) {
		h = (h ^ uint32(name[i])) * 16777619
	}
	for i := range b {
		h = h*1103515245 + 12345
		b[i] = byte(h >> 16)
	}
	return b
}

// Generate plans specs with plan and writes the files, each tensor's bytes
// its Content.
func Generate(t testing.TB, specs []Spec, sizeOf SizeFunc, plan func([]formats.Tensor) (*formats.Layout, error)) map[string][]byte {
	t.Helper()
	tensors := make([]formats.Tensor, len(specs))
	for i, s := range specs {
		tensors[i] = s.Tensor(t, sizeOf)
	}
	l, err := plan(tensors)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	return MaterializeContent(t, l)
}

// MaterializeContent writes a planned layout whose tensors hold their
// Content.
func MaterializeContent(t testing.TB, l *formats.Layout) map[string][]byte {
	t.Helper()
	data := make([][]byte, len(l.Tensors))
	for i, tn := range l.Tensors {
		data[i] = Content(tn.Name, tn.Size)
	}
	files, err := Materialize(l, data)
	if err != nil {
		t.Fatalf("Materialize: %v", err)
	}
	return files
}

// CheckParsed is the body every codec's fuzz target shares: a parse of
// any bytes fails with a classified error, or gives a layout consistent
// with the files. It reports whether the parse was accepted.
func CheckParsed(t testing.TB, l *formats.Layout, err error, files map[string][]byte) bool {
	t.Helper()
	if err != nil {
		if errs.ClassOf(err) == 0 {
			t.Fatalf("error without a class: %v", err)
		}
		return false
	}
	if err := CheckLayout(l, files); err != nil {
		t.Fatalf("accepted with an inconsistent layout: %v", err)
	}
	return true
}

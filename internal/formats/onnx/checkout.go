package onnx

import (
	"fmt"
	"path"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

// Honours: an ONNX model's tensors go to one external data file or
// inside the .onnx file; it is neither sharded nor cast.
func (codec) Honours() []formats.Option {
	return []formats.Option{formats.OptExternalData, formats.OptInlineData, formats.OptSizeThreshold, formats.OptAlignment}
}

// Extensions are stripped from an added file's name for its ref name.
func (codec) Extensions() []string { return []string{".onnx"} }

// Export names a checkout of an ONNX model in another format after its
// first .onnx file.
func (codec) Export(req formats.PlanRequest, _ string, _ bool) (*formats.Export, error) {
	for _, f := range req.Source.Files {
		if f.Role == objects.RoleContainer && Codec.Claims(f.Path) {
			return &formats.Export{Name: strings.TrimSuffix(f.Path, path.Ext(f.Path))}, nil
		}
	}
	return &formats.Export{}, nil
}

// Keeps: an ONNX re-layout keeps the graph it rewrites.
func (codec) Keeps(k formats.HeldKind) bool { return k == formats.HeldGraph }

// Holds: each .onnx file's graph (nodes, inputs, outputs, attributes),
// and the tensors whose data stays in the protobuf (int64_data,
// string_data, …), which only ONNX keeps.
func (codec) Holds(m *objects.Manifest, _ func(formats.HeldKind) bool) ([]formats.Held, error) {
	var out []formats.Held
	for _, f := range m.Files {
		if f.Role != objects.RoleContainer || !Codec.Claims(f.Path) {
			continue
		}
		out = append(out, formats.Held{What: f.Path + ": its graph (nodes, inputs, outputs, attributes)", Kind: formats.HeldGraph})
		if n := f.Meta[MetaFrameTensors]; n != "" {
			out = append(out, formats.Held{What: fmt.Sprintf("%s: %s tensors whose data is not raw bytes (int64_data, string_data, …: %s)", f.Path, n, f.Meta[MetaFrameTensorNames]),
				Kind: formats.HeldGraph})
		}
	}
	return out, nil
}

// PlanCheckout lays an ONNX model out again: every initializer of at least
// --size-threshold bytes in one --external-data file (aligned as
// --alignment says), or every tensor inside the .onnx file
// (--inline-data). The protobuf around the tensors is the stored frame,
// rewritten where the tensors' fields change.
func (codec) PlanCheckout(req formats.PlanRequest) (*formats.Planned, error) {
	m, o := req.Source, req.Options
	switch {
	case m.Format != Codec.Name():
		return nil, errs.New(errs.UnsupportedVersion, "checkout", "an ONNX model is a graph as well as tensors: only a version added as ONNX can be written as ONNX (this one is %s)", m.Format)
	case len(req.Tensors) != len(m.Tensors):
		return nil, errs.New(errs.SchemaError, "checkout", "--tensors cannot leave tensors out of an ONNX model: its graph needs every one")
	case o.ExternalData != "" && o.InlineData:
		return nil, errs.New(errs.SchemaError, "checkout", "--external-data and --inline-data exclude each other")
	case o.ExternalData == "" && !o.InlineData:
		return nil, errs.New(errs.SchemaError, "checkout", "an ONNX re-layout needs --external-data NAME or --inline-data")
	case o.InlineData && (o.Alignment > 0 || o.SizeThreshold != nil):
		return nil, errs.New(errs.SchemaError, "checkout", "--alignment and --size-threshold apply to --external-data, not to --inline-data")
	}

	if req.Frames == nil {
		return nil, errs.New(errs.UnsupportedVersion, "checkout", "an ONNX re-layout needs the stored frames, which this caller does not give")
	}
	var files []SourceFile
	others := map[string]bool{}
	for _, f := range m.Files {
		if f.Role == objects.RoleOther {
			others[f.Path] = true
		}
		if f.Role != objects.RoleContainer || !Codec.Claims(f.Path) {
			continue
		}
		frames, err := req.Frames(f.Path, MaxModelSize)
		if err != nil {
			return nil, err
		}
		sf := SourceFile{Path: f.Path, Size: f.Size}
		var off int64
		for i, e := range f.Extents {
			fe := formats.Extent{Offset: off, Size: e.Size}
			switch e.Kind {
			case objects.ExtentFrame:
				fe.Kind, fe.Bytes = formats.Frame, frames[i]
			case objects.ExtentTensor:
				fe.Kind, fe.Tensor = formats.TensorData, e.Tensor
			case objects.ExtentZeros:
				fe.Kind = formats.Zeros
			}
			sf.Extents = append(sf.Extents, fe)
			off += e.Size
		}
		files = append(files, sf)
	}
	tensors := make([]formats.Tensor, len(req.Tensors))
	for i, t := range req.Tensors {
		tensors[i] = formats.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Size: t.Size}
	}
	l, err := Plan(files, tensors, PlanOptions{ExternalData: o.ExternalData, SizeThreshold: threshold(o.SizeThreshold), Alignment: o.Alignment})
	if err != nil {
		return nil, err
	}
	for _, f := range l.Files {
		if others[f.Path] {
			return nil, errs.New(errs.SchemaError, "checkout", "the external data file %s would overwrite the model's file of that name; choose another --external-data", f.Path)
		}
	}
	return &formats.Planned{Layout: l, Used: o.Uses(formats.OptExternalData, formats.OptInlineData, formats.OptSizeThreshold, formats.OptAlignment)}, nil
}

// threshold is PlanOptions.SizeThreshold for --size-threshold: 0 (the
// default) when not given; a given 0 is onnx's "every tensor moves",
// which a threshold of 1 byte is, as a tensor without data never moves.
func threshold(given *int64) int64 {
	switch {
	case given == nil:
		return 0
	case *given == 0:
		return 1
	}
	return *given
}

package restorer

import (
	"path"
	"strings"

	"github.com/mstore/mstore/formats"
	"github.com/mstore/mstore/formats/onnx"
	"github.com/mstore/mstore/formats/safetensors"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/objects"
)

func init() {
	planners["onnx"] = planONNX
	safetensorsFrom["onnx"] = onnxToSafetensors
}

// onnxToSafetensors names a SafeTensors checkout of an ONNX model after its
// first .onnx file. It refuses (lossy_conversion) tensors whose dtype
// SafeTensors lacks (INT4, FLOAT8E4M3FNUZ, COMPLEX128, …) and, unless
// --tensors chose what to convert, a model with tensors whose data stays in
// the protobuf (int64_data, string_data, …): SafeTensors would not have
// them.
func onnxToSafetensors(req PlanRequest) (string, map[string]string, error) {
	var lacking []string
	for _, t := range req.Tensors {
		if _, err := safetensors.TensorSize(t.DType, t.Shape); errs.ClassOf(err) == errs.UnsupportedVersion {
			lacking = append(lacking, t.Name+" ("+t.DType+")")
		}
	}
	if len(lacking) > 0 {
		if len(lacking) > 8 {
			lacking = append(lacking[:8], "…")
		}
		return "", nil, errs.New(errs.LossyConversion, "checkout", "SafeTensors has no dtype for %s; leave them out with --tensors", strings.Join(lacking, ", "))
	}
	name := ""
	for _, f := range req.Source.Files {
		if f.Role != objects.RoleContainer || !onnx.Codec.Claims(f.Path) {
			continue
		}
		if n := f.Meta[onnx.MetaFrameTensors]; n != "" && len(req.Options.Tensors) == 0 {
			return "", nil, errs.New(errs.LossyConversion, "checkout", "%s holds %s tensors whose data is not raw bytes (int64_data, string_data, …: %s) and SafeTensors would not have them; choose the tensors to convert with --tensors", f.Path, n, f.Meta[onnx.MetaFrameTensorNames])
		}
		if name == "" {
			name = strings.TrimSuffix(f.Path, path.Ext(f.Path))
		}
	}
	return name, nil, nil
}

// planONNX lays an ONNX model out again: every initializer of at least
// --size-threshold bytes in one --external-data file (aligned as
// --alignment says), or every tensor inside the .onnx file
// (--inline-data). The protobuf around the tensors is the stored frame,
// rewritten where the tensors' fields change.
func planONNX(req PlanRequest) (*Planned, error) {
	m, o := req.Source, req.Options
	switch {
	case m.Format != onnx.Codec.Name():
		return nil, errs.New(errs.UnsupportedVersion, "checkout", "an ONNX model is a graph as well as tensors: only a version added as ONNX can be written as ONNX (this one is %s)", m.Format)
	case len(req.Tensors) != len(m.Tensors):
		return nil, errs.New(errs.SchemaError, "checkout", "--tensors cannot leave tensors out of an ONNX model: its graph needs every one")
	case o.MaxShardSize > 0 || o.SplitMaxSize > 0 || o.SplitMaxTensors > 0 || o.DType != "":
		return nil, errs.New(errs.SchemaError, "checkout", "ONNX re-layouts take --external-data or --inline-data, --size-threshold and --alignment; shard, split and dtype options do not apply")
	case o.ExternalData != "" && o.InlineData:
		return nil, errs.New(errs.SchemaError, "checkout", "--external-data and --inline-data exclude each other")
	case o.ExternalData == "" && !o.InlineData:
		return nil, errs.New(errs.SchemaError, "checkout", "an ONNX re-layout needs --external-data NAME or --inline-data")
	case o.InlineData && (o.Alignment > 0 || o.SizeThreshold > 0):
		return nil, errs.New(errs.SchemaError, "checkout", "--alignment and --size-threshold apply to --external-data, not to --inline-data")
	}

	if req.Frames == nil {
		return nil, errs.New(errs.UnsupportedVersion, "checkout", "an ONNX re-layout needs the stored frames, which this caller does not give")
	}
	var files []onnx.SourceFile
	others := map[string]bool{}
	for _, f := range m.Files {
		if f.Role == objects.RoleOther {
			others[f.Path] = true
		}
		if f.Role != objects.RoleContainer || !onnx.Codec.Claims(f.Path) {
			continue
		}
		frames, err := req.Frames(f.Path, onnx.MaxModelSize)
		if err != nil {
			return nil, err
		}
		sf := onnx.SourceFile{Path: f.Path, Size: f.Size}
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
	l, err := onnx.Plan(files, tensors, onnx.PlanOptions{ExternalData: o.ExternalData, SizeThreshold: o.SizeThreshold, Alignment: o.Alignment})
	if err != nil {
		return nil, err
	}
	for _, f := range l.Files {
		if others[f.Path] {
			return nil, errs.New(errs.SchemaError, "checkout", "the external data file %s would overwrite the model's file of that name; choose another --external-data", f.Path)
		}
	}
	return &Planned{Layout: l}, nil
}

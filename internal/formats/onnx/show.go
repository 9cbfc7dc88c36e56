package onnx

import (
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

type onnxModelView struct {
	Path         string `json:"path"`
	IRVersion    string `json:"ir_version"`
	Opsets       string `json:"opset_import"`
	Producer     string `json:"producer,omitempty"`
	Inside       int    `json:"tensors_inside"`
	FrameTensors string `json:"frame_tensors,omitempty"`
	FrameNames   string `json:"frame_tensor_names,omitempty"`
}

type onnxDataView struct {
	Path    string `json:"path"`
	Tensors int    `json:"tensors"`
	Size    int64  `json:"size"`
}

type onnxView struct {
	Models    []onnxModelView `json:"models"`
	DataFiles []onnxDataView  `json:"data_files"`
}

// Describe lists each .onnx file (IR version, opsets, producer, how many
// tensors it holds, and those kept in the protobuf) and the external data
// files of the model.
func (codec) Describe(m *objects.Manifest) (*formats.Details, error) {
	v := onnxView{Models: []onnxModelView{}, DataFiles: []onnxDataView{}}
	var blocks []formats.Block
	for _, f := range m.Files {
		if f.Role != objects.RoleContainer {
			continue
		}
		n := 0
		for _, e := range f.Extents {
			if e.Kind == objects.ExtentTensor {
				n++
			}
		}
		if !Codec.Claims(f.Path) {
			v.DataFiles = append(v.DataFiles, onnxDataView{Path: f.Path, Tensors: n, Size: f.Size})
			blocks = append(blocks, formats.Line("external data %s: %s tensors in %s", formats.V(f.Path), formats.Vf("%d", n), formats.Size(f.Size)))
			continue
		}
		mv := onnxModelView{Path: f.Path, IRVersion: f.Meta[MetaIRVersion], Opsets: f.Meta[MetaOpsets],
			Producer: f.Meta[MetaProducer], Inside: n,
			FrameTensors: f.Meta[MetaFrameTensors], FrameNames: f.Meta[MetaFrameTensorNames]}
		v.Models = append(v.Models, mv)
		line := formats.Line("model %s: IR %s, opsets %s", formats.V(mv.Path), formats.V(mv.IRVersion), formats.Clip(mv.Opsets, 400))
		if mv.Producer != "" {
			line.Format += ", from %s"
			line.Values = append(line.Values, formats.Clip(mv.Producer, 200))
		}
		line.Format += "; %s tensors inside"
		line.Values = append(line.Values, formats.Vf("%d", n))
		blocks = append(blocks, line)
		if mv.FrameTensors != "" {
			blocks = append(blocks, formats.Line("  %s tensors kept in the protobuf (int64_data, string_data, …): %s", formats.V(mv.FrameTensors), formats.V(mv.FrameNames)))
		}
	}
	return &formats.Details{Blocks: blocks, Data: v}, nil
}

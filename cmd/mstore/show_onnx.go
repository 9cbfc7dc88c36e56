package main

import (
	"fmt"
	"strings"

	"github.com/mstore/mstore/formats/onnx"
	"github.com/mstore/mstore/objects"
	"github.com/mstore/mstore/store"
)

func init() {
	formatDetails["onnx"] = showONNX
}

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

// showONNX lists each .onnx file (IR version, opsets, producer, how many
// tensors it holds, and those kept in the protobuf) and the external data
// files of the model.
func showONNX(_ *store.Store, m *objects.Manifest) (string, any, error) {
	v := onnxView{Models: []onnxModelView{}, DataFiles: []onnxDataView{}}
	var b strings.Builder
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
		if !onnx.Codec.Claims(f.Path) {
			v.DataFiles = append(v.DataFiles, onnxDataView{Path: f.Path, Tensors: n, Size: f.Size})
			fmt.Fprintf(&b, "external data %s: %d tensors in %s\n", safe(f.Path), n, humanBytes(f.Size))
			continue
		}
		mv := onnxModelView{Path: f.Path, IRVersion: f.Meta[onnx.MetaIRVersion], Opsets: f.Meta[onnx.MetaOpsets],
			Producer: f.Meta[onnx.MetaProducer], Inside: n,
			FrameTensors: f.Meta[onnx.MetaFrameTensors], FrameNames: f.Meta[onnx.MetaFrameTensorNames]}
		v.Models = append(v.Models, mv)
		fmt.Fprintf(&b, "model %s: IR %s, opsets %s", safe(mv.Path), safe(mv.IRVersion), safeClipped(mv.Opsets, 400))
		if mv.Producer != "" {
			fmt.Fprintf(&b, ", from %s", safeClipped(mv.Producer, 200))
		}
		fmt.Fprintf(&b, "; %d tensors inside\n", n)
		if mv.FrameTensors != "" {
			fmt.Fprintf(&b, "  %s tensors kept in the protobuf (int64_data, string_data, …): %s\n", safe(mv.FrameTensors), safe(mv.FrameNames))
		}
	}
	return b.String(), v, nil
}

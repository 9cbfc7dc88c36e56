package onnx

import (
	"bytes"
	"slices"
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
)

type wantTensor struct {
	name  string
	dtype string
	shape []int64
	file  string
	data  []byte
}

// checkTensors parses files and compares the tensors, in order, with want:
// names, dtypes, shapes, the file holding them and their bytes.
func checkTensors(t *testing.T, files map[string][]byte, want []wantTensor) *formats.Layout {
	t.Helper()
	l, err := parseFiles(files)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if err := formattest.CheckLayout(l, files); err != nil {
		t.Fatal(err)
	}
	data, err := formattest.TensorData(l, files)
	if err != nil {
		t.Fatal(err)
	}
	fileOf := map[int]string{}
	for _, f := range l.Files {
		for _, e := range f.Extents {
			if e.Kind == formats.TensorData {
				fileOf[e.Tensor] = f.Path
			}
		}
	}
	if len(l.Tensors) != len(want) {
		t.Fatalf("%d tensors %+v, want %d", len(l.Tensors), l.Tensors, len(want))
	}
	for i, w := range want {
		got := l.Tensors[i]
		if got.Name != w.name || got.DType != w.dtype || !slices.Equal(got.Shape, w.shape) || fileOf[i] != w.file || !bytes.Equal(data[i], w.data) {
			t.Errorf("tensor %d: %q %s%v in %s (% x), want %q %s%v in %s (% x)", i, got.Name, got.DType, got.Shape, fileOf[i], data[i], w.name, w.dtype, w.shape, w.file, w.data)
		}
	}
	return l
}

func TestNamesAcrossGraphs(t *testing.T) {
	a, b, c, d := f32(2), f32(3), []byte{1, 2, 3, 4, 5, 6, 7, 8}, f32(1)
	sub := graphMsg(rawTensor("w", typeFloat, b, 3)).sub(graphNode, constantNode("k", rawTensor("ignored", 7, c)))
	g := graphMsg(rawTensor("w", typeFloat, a, 2)).
		sub(graphNode, ifNode("if1", sub)).
		sub(graphNode, msg(nil).str(nodeOutput, "y").str(nodeOpType, "ConstantOfShape").sub(nodeAttribute,
			msg(nil).str(attrName, "value").sub(attrT, rawTensor("", typeFloat, d, 1))))
	files := map[string][]byte{"m.onnx": modelMsg(g)}
	checkTensors(t, files, []wantTensor{
		{"w", "F32", []int64{2}, "m.onnx", a},
		{"m.onnx:if1.then_branch/w", "F32", []int64{3}, "m.onnx", b},
		{"k", "I64", []int64{}, "m.onnx", c},
		{"y.value", "F32", []int64{1}, "m.onnx", d},
	})
	// A second file with the same names: qualified by its path, then numbered.
	files["n.onnx"] = modelMsg(graphMsg(rawTensor("w", typeFloat, a, 2), rawTensor("n.onnx:w", typeFloat, b, 3)))
	files["o.onnx"] = modelMsg(graphMsg(rawTensor("n.onnx:w", typeFloat, d, 1)))
	checkTensors(t, files, []wantTensor{
		{"w", "F32", []int64{2}, "m.onnx", a},
		{"m.onnx:if1.then_branch/w", "F32", []int64{3}, "m.onnx", b},
		{"k", "I64", []int64{}, "m.onnx", c},
		{"y.value", "F32", []int64{1}, "m.onnx", d},
		{"n.onnx:w", "F32", []int64{2}, "n.onnx", a},
		{"n.onnx:n.onnx:w", "F32", []int64{3}, "n.onnx", b},
		{"o.onnx:n.onnx:w", "F32", []int64{1}, "o.onnx", d},
	})
}

func TestDataPlaces(t *testing.T) {
	a, b := f32(4), f32(2)
	stale := bytes.Repeat([]byte{0xee}, 100)
	ext := append(append(append([]byte{}, stale...), a...), 0xaa, 0xbb)
	int64Data := tensorMsg("ints", 7, 2).bytes(tensorInt64Data, []byte{1, 2})
	doubles := make([]byte, 16)
	doubles[7], doubles[15] = 0x3f, 0x40
	files := map[string][]byte{
		"sub/m.onnx": modelMsg(graphMsg(
			extTensor("ext", typeFloat, []int64{2, 2}, "location", "data/w.bin", "offset", "100", "checksum", "abc"),
			tensorMsg("floats", typeFloat, 2).bytes(tensorFloatData, b),
			tensorMsg("doubles", typeDouble, 2).bytes(tensorDoubleData, doubles),
			int64Data,
			tensorMsg("unpacked", typeFloat, 1).raw(0x25, 0, 0, 0x80, 0x3f),
			extTensor("ext2", 2, []int64{2}, "location", "data/w.bin", "offset", "116", "length", "2"),
		).sub(graphSparseInitializer, msg(nil).
			sub(sparseValues, rawTensor("sp", typeFloat, b, 2)).
			sub(sparseIndices, rawTensor("", 7, make([]byte, 16), 2)).
			varint(3, 10))),
		"sub/data/w.bin": ext,
		"unrelated.bin":  []byte("not part of the model"),
	}
	l := checkTensors(t, files, []wantTensor{
		{"ext", "F32", []int64{2, 2}, "sub/data/w.bin", a},
		{"floats", "F32", []int64{2}, "sub/m.onnx", b},
		{"doubles", "F64", []int64{2}, "sub/m.onnx", doubles},
		{"ext2", "U8", []int64{2}, "sub/data/w.bin", []byte{0xaa, 0xbb}},
		{"sp.values", "F32", []int64{2}, "sub/m.onnx", b},
		{"sp.indices", "I64", []int64{2}, "sub/m.onnx", make([]byte, 16)},
	})
	if len(l.Files) != 2 || l.Files[0].Path != "sub/data/w.bin" {
		t.Fatalf("files %v", l.Files)
	}
	if m := l.Files[1].Meta; m[MetaFrameTensors] != "2" || m[MetaFrameTensorNames] != "ints, unpacked" {
		t.Errorf("meta %v", m)
	}
	if e := l.Files[0].Extents[0]; e.Kind != formats.Frame || e.Size != 100 {
		t.Errorf("stale bytes before the first tensor: %+v", e)
	}
}

func TestSubByteTypes(t *testing.T) {
	files := map[string][]byte{"m.onnx": modelMsg(graphMsg(
		rawTensor("i4", 22, []byte{0x21, 0x03}, 3),
		rawTensor("u2", 25, []byte{0xe4, 0x01}, 5),
		rawTensor("f4", 23, []byte{0x11}, 2),
	))}
	checkTensors(t, files, []wantTensor{
		{"i4", "INT4", []int64{3}, "m.onnx", []byte{0x21, 0x03}},
		{"u2", "UINT2", []int64{5}, "m.onnx", []byte{0xe4, 0x01}},
		{"f4", "F4", []int64{2}, "m.onnx", []byte{0x11}},
	})
}

func TestFunctionsAndTraining(t *testing.T) {
	a, b := f32(1), f32(2)
	fn := msg(nil).str(functionName, "f").str(functionDomain, "my").
		sub(functionOpset, msg(nil).str(opsetDomain, "").varint(opsetVersion, 17)).
		sub(functionNode, constantNode("c", rawTensor("", typeFloat, a, 1)))
	training := msg(nil).sub(trainingAlgorithm, graphMsg(rawTensor("w", typeFloat, b, 2)))
	m := msg(modelMsg(graphMsg(rawTensor("w", typeFloat, a, 1)))).sub(modelFunctions, fn).sub(modelTrainingInfo, training)
	files := map[string][]byte{"m.onnx": m}
	checkTensors(t, files, []wantTensor{
		{"w", "F32", []int64{1}, "m.onnx", a},
		{"c", "F32", []int64{1}, "m.onnx", a},
		{"m.onnx:training_info[0]/algorithm/w", "F32", []int64{2}, "m.onnx", b},
	})
	// The training initializer stays inside when initializers move out.
	l, _ := parseFiles(files)
	planned, written := replan(t, l, files, PlanOptions{ExternalData: "x.data", SizeThreshold: 1})
	back, err := parseFiles(written)
	if err != nil {
		t.Fatal(err)
	}
	checkSameLayout(t, back, planned)
	if len(back.Files) != 2 || back.Files[1].Path != "x.data" || len(back.Files[1].Extents) != 1 || back.Files[1].Extents[0].Tensor != 0 {
		t.Errorf("only the main graph's initializer should be external: %+v", back.Files)
	}
}

// TestManyDuplicateNames: tensors of one name are numbered in linear time.
func TestManyDuplicateNames(t *testing.T) {
	const n = 20000
	inits := make([]msg, n)
	for i := range inits {
		inits[i] = rawTensor("w", 2, []byte{byte(i)}, 1)
	}
	l, err := parseFiles(map[string][]byte{"m.onnx": modelMsg(graphMsg(inits...))})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Tensors) != n || l.Tensors[0].Name != "w" || l.Tensors[1].Name != "m.onnx:w" || l.Tensors[n-1].Name != "m.onnx:w~19999" {
		t.Errorf("%d tensors, names %q %q … %q", len(l.Tensors), l.Tensors[0].Name, l.Tensors[1].Name, l.Tensors[n-1].Name)
	}
}

package onnx

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/testenv"
)

// msg builds protobuf messages for test models, field by field.
type msg []byte

func (m msg) varint(num protowire.Number, v uint64) msg {
	return msg(appendVarintField(m, num, v))
}

func (m msg) bytes(num protowire.Number, b []byte) msg {
	return msg(appendBytesField(m, num, b))
}

func (m msg) str(num protowire.Number, s string) msg { return m.bytes(num, []byte(s)) }

func (m msg) sub(num protowire.Number, child msg) msg { return m.bytes(num, child) }

// raw appends bytes as they are (for broken fields).
func (m msg) raw(b ...byte) msg { return append(m, b...) }

// tensorMsg is a TensorProto with dims and data_type and no data yet.
func tensorMsg(name string, dataType int64, dims ...int64) msg {
	var t msg
	for _, d := range dims {
		t = t.varint(tensorDims, uint64(d))
	}
	t = t.varint(tensorDataType, uint64(dataType))
	if name != "" {
		t = t.str(tensorName, name)
	}
	return t
}

// rawTensor is a TensorProto holding data in raw_data.
func rawTensor(name string, dataType int64, data []byte, dims ...int64) msg {
	return tensorMsg(name, dataType, dims...).bytes(tensorRawData, data)
}

// extTensor is a TensorProto whose data is external, with the given
// key/value entries (in pairs).
func extTensor(name string, dataType int64, dims []int64, kv ...string) msg {
	t := tensorMsg(name, dataType, dims...)
	for i := 0; i+1 < len(kv); i += 2 {
		t = t.sub(tensorExternalData, msg(nil).str(entryKey, kv[i]).str(entryValue, kv[i+1]))
	}
	return t.varint(tensorDataLocation, 1)
}

// graphMsg is a GraphProto with the given initializers.
func graphMsg(inits ...msg) msg {
	g := msg(nil).str(2, "g")
	for _, t := range inits {
		g = g.sub(graphInitializer, t)
	}
	return g
}

// constantNode is a Constant node whose value is tensor t.
func constantNode(output string, t msg) msg {
	attr := msg(nil).str(attrName, "value").varint(20, 4).sub(attrT, t)
	return msg(nil).str(nodeOutput, output).str(nodeOpType, "Constant").sub(nodeAttribute, attr)
}

// ifNode is an If node whose then_branch is g.
func ifNode(name string, g msg) msg {
	attr := msg(nil).str(attrName, "then_branch").varint(20, 5).sub(attrG, g)
	return msg(nil).str(nodeName, name).str(nodeOpType, "If").sub(nodeAttribute, attr)
}

// modelMsg is a ModelProto of IR 8, opset 17, holding graph g.
func modelMsg(g msg) []byte {
	return modelWith(8, 17, g)
}

func modelWith(ir, opset uint64, g msg) []byte {
	m := msg(nil).varint(modelIRVersion, ir).str(2, "mstore-test")
	m = m.sub(modelOpsetImport, msg(nil).str(opsetDomain, "").varint(opsetVersion, opset))
	return m.sub(modelGraph, g)
}

// f32 is n little-endian float32 values 1, 2, 3, … as bytes.
func f32(n int) []byte {
	b := make([]byte, 0, 4*n)
	for i := range n {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(i+1)))
	}
	return b
}

func parseFiles(files map[string][]byte) (*formats.Layout, error) {
	return Codec.Parse(formattest.NewMemDir(files), formattest.ClaimedPaths(Codec, files))
}

// testdataDir finds shared/testdata/onnx above the working directory.
func testdataDir() string { return formattest.SharedTestdata("onnx") }

// realSamples are the real third-party models, one sample per .onnx file
// with the other files of its folder (its external data among them), or
// skips.
func realSamples(t testing.TB) []formattest.Sample {
	t.Helper()
	root := testdataDir()
	if root == "" {
		testenv.Missing(t, "no shared/testdata/onnx above the working directory: real-model checks skipped")
	}
	var models []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".onnx") {
			models = append(models, p)
		}
		return err
	})
	if err != nil || len(models) == 0 {
		testenv.Missing(t, "no .onnx files in %s (%v)", root, err)
	}
	sort.Strings(models)
	var out []formattest.Sample
	for _, p := range models {
		files := map[string][]byte{}
		entries, err := os.ReadDir(filepath.Dir(p))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			full := filepath.Join(filepath.Dir(p), e.Name())
			if e.IsDir() || (strings.HasSuffix(e.Name(), ".onnx") && full != p) {
				continue
			}
			b, err := os.ReadFile(full)
			if err != nil {
				t.Fatal(err)
			}
			files[e.Name()] = b
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, formattest.Sample{Name: filepath.ToSlash(rel), Files: files})
	}
	return out
}

// sourceFiles turns a parsed layout's .onnx files into Plan's input, frame
// bytes read from files.
func sourceFiles(l *formats.Layout, files map[string][]byte) []SourceFile {
	var out []SourceFile
	for _, f := range l.Files {
		if !Codec.Claims(f.Path) {
			continue
		}
		sf := SourceFile{Path: f.Path, Size: f.Size}
		for _, e := range f.Extents {
			if e.Kind == formats.Frame {
				e.Bytes = files[f.Path][e.Offset : e.Offset+e.Size]
			}
			sf.Extents = append(sf.Extents, e)
		}
		out = append(out, sf)
	}
	return out
}

// replan plans the parsed model again with opts and writes it.
func replan(t testing.TB, l *formats.Layout, files map[string][]byte, opts PlanOptions) (*formats.Layout, map[string][]byte) {
	t.Helper()
	planned, err := Plan(sourceFiles(l, files), l.Tensors, opts)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	data, err := formattest.TensorData(l, files)
	if err != nil {
		t.Fatal(err)
	}
	written, err := formattest.Materialize(planned, data)
	if err != nil {
		t.Fatalf("Materialize: %v", err)
	}
	return planned, written
}

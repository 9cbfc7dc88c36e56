package onnx

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/modeldir"
	"github.com/mstore/mstore/internal/testenv"
)

// extModel is a model with one 4×F32 initializer "w" whose external data
// entries are kv.
func extModel(kv ...string) []byte {
	return modelMsg(graphMsg(extTensor("w", typeFloat, []int64{4}, kv...)))
}

// nested is a model whose tensor lies in levels of If subgraphs.
func nested(levels int) []byte {
	g := graphMsg(rawTensor("w", typeFloat, f32(1), 1))
	for range levels {
		g = msg(nil).str(2, "g").sub(graphNode, ifNode("if", g))
	}
	return modelMsg(g)
}

func TestBadModels(t *testing.T) {
	data := f32(4)
	good := modelMsg(graphMsg(rawTensor("w", typeFloat, data, 4)))
	cut := bytes.Index(good, data)
	cases := []struct {
		name  string
		files map[string][]byte
		class errs.Class
	}{
		{"absolute location", map[string][]byte{"m.onnx": extModel("location", "/etc/passwd")}, errs.PathTraversal},
		{"dot-dot location", map[string][]byte{"m.onnx": extModel("location", "../w.bin")}, errs.PathTraversal},
		{"dot-dot after a folder", map[string][]byte{"m.onnx": extModel("location", "sub/../../w.bin")}, errs.PathTraversal},
		{"dot-dot that stays inside", map[string][]byte{"m.onnx": extModel("location", "sub/../w.bin"), "w.bin": data}, errs.PathTraversal},
		{"drive prefix", map[string][]byte{"m.onnx": extModel("location", "C:/w.bin")}, errs.PathTraversal},
		{"backslash", map[string][]byte{"m.onnx": extModel("location", `..\w.bin`)}, errs.PathTraversal},
		{"look-alike slash", map[string][]byte{"m.onnx": extModel("location", "sub\u2215w.bin")}, errs.PathTraversal},
		{"empty location", map[string][]byte{"m.onnx": extModel("location", "")}, errs.PathTraversal},
		{"missing data file", map[string][]byte{"m.onnx": extModel("location", "w.bin")}, errs.InvalidArchive},
		{"data past the end", map[string][]byte{"m.onnx": extModel("location", "w.bin", "offset", "4"), "w.bin": data}, errs.InvalidArchive},
		{"data file too short", map[string][]byte{"m.onnx": extModel("location", "w.bin"), "w.bin": data[:15]}, errs.InvalidArchive},
		{"negative offset", map[string][]byte{"m.onnx": extModel("location", "w.bin", "offset", "-1"), "w.bin": data}, errs.SchemaError},
		{"non-numeric offset", map[string][]byte{"m.onnx": extModel("location", "w.bin", "offset", "abc"), "w.bin": data}, errs.SchemaError},
		{"signed length", map[string][]byte{"m.onnx": extModel("location", "w.bin", "length", "+16"), "w.bin": data}, errs.SchemaError},
		{"offset overflow", map[string][]byte{"m.onnx": extModel("location", "w.bin", "offset", "99999999999999999999"), "w.bin": data}, errs.SchemaError},
		{"length not the tensor's size", map[string][]byte{"m.onnx": extModel("location", "w.bin", "length", "12"), "w.bin": data}, errs.SchemaError},
		{"unknown key", map[string][]byte{"m.onnx": extModel("location", "w.bin", "basepath", "/"), "w.bin": data}, errs.SchemaError},
		{"key given twice", map[string][]byte{"m.onnx": extModel("location", "w.bin", "location", "w.bin"), "w.bin": data}, errs.SchemaError},
		{"no location", map[string][]byte{"m.onnx": extModel("offset", "0"), "w.bin": data}, errs.SchemaError},
		{"location names a model", map[string][]byte{"m.onnx": extModel("location", "m.onnx")}, errs.SchemaError},
		{"overlapping tensors", map[string][]byte{"m.onnx": modelMsg(graphMsg(
			extTensor("a", typeFloat, []int64{4}, "location", "w.bin"),
			extTensor("b", typeFloat, []int64{2}, "location", "w.bin", "offset", "8"))), "w.bin": data}, errs.InvalidArchive},
		{"external and raw data", map[string][]byte{"m.onnx": modelMsg(graphMsg(extTensor("w", typeFloat, []int64{4}, "location", "w.bin").bytes(tensorRawData, data))), "w.bin": data}, errs.SchemaError},
		{"external_data without EXTERNAL", map[string][]byte{"m.onnx": modelMsg(graphMsg(tensorMsg("w", typeFloat, 4).sub(tensorExternalData, msg(nil).str(entryKey, "location").str(entryValue, "w.bin")))), "w.bin": data}, errs.SchemaError},
		{"data_location 2", map[string][]byte{"m.onnx": modelMsg(graphMsg(rawTensor("w", typeFloat, data, 4).varint(tensorDataLocation, 2)))}, errs.SchemaError},
		{"truncated protobuf", map[string][]byte{"m.onnx": good[:cut+5]}, errs.InvalidArchive},
		{"length past the end", map[string][]byte{"m.onnx": msg(nil).varint(modelIRVersion, 8).raw(0x3a, 0xff, 0x01, 0x00)}, errs.InvalidArchive},
		{"truncated varint", map[string][]byte{"m.onnx": msg(nil).raw(0x08, 0x80)}, errs.InvalidArchive},
		{"group wire type", map[string][]byte{"m.onnx": msg(nil).varint(modelIRVersion, 8).raw(0x0b, 0x0c)}, errs.InvalidArchive},
		{"nested 40 graphs deep", map[string][]byte{"m.onnx": nested(40)}, errs.SizeLimitExceeded},
		{"raw_data shorter than dims need", map[string][]byte{"m.onnx": modelMsg(graphMsg(rawTensor("w", typeFloat, data[:12], 4)))}, errs.SchemaError},
		{"raw_data longer than dims need", map[string][]byte{"m.onnx": modelMsg(graphMsg(rawTensor("w", typeFloat, data, 3)))}, errs.SchemaError},
		{"packed floats of the wrong count", map[string][]byte{"m.onnx": modelMsg(graphMsg(tensorMsg("w", typeFloat, 5).bytes(tensorFloatData, data)))}, errs.SchemaError},
		{"float_data of an INT64 tensor", map[string][]byte{"m.onnx": modelMsg(graphMsg(tensorMsg("w", 7, 2).bytes(tensorFloatData, data[:8])))}, errs.SchemaError},
		{"negative dim", map[string][]byte{"m.onnx": modelMsg(graphMsg(rawTensor("w", typeFloat, data, 4, -1)))}, errs.SchemaError},
		{"dims overflow", map[string][]byte{"m.onnx": modelMsg(graphMsg(rawTensor("w", typeFloat, data, 1<<40, 1<<40)))}, errs.SchemaError},
		{"STRING raw_data", map[string][]byte{"m.onnx": modelMsg(graphMsg(rawTensor("w", typeString, data, 4)))}, errs.SchemaError},
		{"UNDEFINED data_type", map[string][]byte{"m.onnx": modelMsg(graphMsg(rawTensor("w", 0, data, 4)))}, errs.SchemaError},
		{"data in two fields", map[string][]byte{"m.onnx": modelMsg(graphMsg(rawTensor("w", typeFloat, data, 4).bytes(tensorRawData, data)))}, errs.SchemaError},
		{"raw_data as a varint", map[string][]byte{"m.onnx": modelMsg(graphMsg(tensorMsg("w", typeFloat, 4).varint(tensorRawData, 1)))}, errs.SchemaError},
		{"initializer without a name", map[string][]byte{"m.onnx": modelMsg(graphMsg(rawTensor("", typeFloat, data, 4)))}, errs.SchemaError},
		{"name not UTF-8", map[string][]byte{"m.onnx": modelMsg(graphMsg(rawTensor("w\xff", typeFloat, data, 4)))}, errs.SchemaError},
		{"empty file", map[string][]byte{"m.onnx": {}}, errs.SchemaError},
		{"no graph", map[string][]byte{"m.onnx": msg(nil).varint(modelIRVersion, 8)}, errs.SchemaError},
		{"no opset_import", map[string][]byte{"m.onnx": msg(nil).varint(modelIRVersion, 8).sub(modelGraph, graphMsg())}, errs.SchemaError},
		{"ir_version from the future", map[string][]byte{"m.onnx": modelWith(MaxIRVersion+1, 17, graphMsg())}, errs.UnsupportedVersion},
		{"opset from the future", map[string][]byte{"m.onnx": modelWith(8, MaxOpsets[""]+1, graphMsg())}, errs.UnsupportedVersion},
		{"data_type from the future", map[string][]byte{"m.onnx": modelMsg(graphMsg(rawTensor("w", maxKnownType+1, data, 4)))}, errs.UnsupportedVersion},
		{"segmented tensor", map[string][]byte{"m.onnx": modelMsg(graphMsg(rawTensor("w", typeFloat, data, 4).sub(tensorSegment, msg(nil).varint(1, 0))))}, errs.UnsupportedVersion},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := formattest.ParseRecovering(Codec, c.files, formattest.ClaimedPaths(Codec, c.files))
			if errs.ClassOf(err) != c.class {
				t.Fatalf("got %v (layout %v), want class %s", err, l != nil, c.class.Key())
			}
			t.Log(err)
		})
	}
}

// TestDepthBound: a model just under the nesting bound parses.
func TestDepthBound(t *testing.T) {
	// ModelProto 1, GraphProto 2, then 3 levels per If, the tensor last.
	l, err := parseFiles(map[string][]byte{"m.onnx": nested((MaxDepth - 3) / 3)})
	if err != nil {
		t.Fatalf("model within the bound refused: %v", err)
	}
	if len(l.Tensors) != 1 || l.Tensors[0].Name != "w" {
		t.Errorf("tensors %+v", l.Tensors)
	}
	if _, err := parseFiles(map[string][]byte{"m.onnx": nested((MaxDepth-3)/3 + 1)}); errs.ClassOf(err) != errs.SizeLimitExceeded {
		t.Errorf("one level more: %v, want size_limit_exceeded", err)
	}
}

// TestLinkedDataFiles: on a real directory, a data file that is a
// symbolic link or has a second hard link is path_traversal.
func TestLinkedDataFiles(t *testing.T) {
	data := f32(4)
	outside := t.TempDir()
	target := filepath.Join(outside, "secret.bin")
	if err := os.WriteFile(target, data, 0o644); err != nil {
		t.Fatal(err)
	}
	link := map[string]func(dst string) error{
		"symbolic link": func(dst string) error { return os.Symlink(target, dst) },
		"hard link":     func(dst string) error { return os.Link(target, dst) },
		"plain file":    func(dst string) error { return os.WriteFile(dst, data, 0o644) },
	}
	for name, make := range link {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "m.onnx"), extModel("location", "w.bin"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := make(filepath.Join(dir, "w.bin")); err != nil {
				testenv.Missing(t, "cannot make a %s here: %v", name, err)
			}
			d, err := modeldir.Open(filepath.Join(dir, "m.onnx")) // the single-file form: w.bin is found through m.onnx
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			l, err := Codec.Parse(d, []string{"m.onnx"})
			if name == "plain file" {
				if err != nil || len(l.Files) != 2 {
					t.Fatalf("plain data file: %v", err)
				}
				return
			}
			if errs.ClassOf(err) != errs.PathTraversal {
				t.Fatalf("got %v, want path_traversal", err)
			}
		})
	}
}

// hugeDir holds one .onnx file that says it is 3 GiB.
type hugeDir struct{}

type hugeFile struct{ *bytes.Reader }

func (hugeFile) Size() int64  { return 3 << 30 }
func (hugeFile) Close() error { return nil }

func (hugeDir) Open(string) (formats.ReadAtCloser, error) { return hugeFile{bytes.NewReader(nil)}, nil }
func (hugeDir) Stat(string) (int64, error)                { return 3 << 30, nil }

func TestModelPastProtobufLimit(t *testing.T) {
	if _, err := Codec.Parse(hugeDir{}, []string{"big.onnx"}); errs.ClassOf(err) != errs.SizeLimitExceeded {
		t.Errorf("3 GiB .onnx: %v, want size_limit_exceeded", err)
	}
}

package restorer

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

// onnxPB builds protobuf messages for the ONNX test model.
type onnxPB []byte

func (m onnxPB) varint(n protowire.Number, v uint64) onnxPB {
	return onnxPB(protowire.AppendVarint(protowire.AppendTag(m, n, protowire.VarintType), v))
}

func (m onnxPB) bytes(n protowire.Number, b []byte) onnxPB {
	return onnxPB(protowire.AppendBytes(protowire.AppendTag(m, n, protowire.BytesType), b))
}

func (m onnxPB) str(n protowire.Number, s string) onnxPB { return m.bytes(n, []byte(s)) }

// onnxTensor is a TensorProto (dims 1, data_type 2, name 8) whose data is
// raw_data (9), or external (13, 14) when kv is given.
func onnxTensor(name string, dataType uint64, n int, raw []byte, kv ...string) onnxPB {
	t := onnxPB(nil).varint(1, uint64(n)).varint(2, dataType).str(8, name)
	if len(kv) == 0 {
		return t.bytes(9, raw)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		t = t.bytes(13, onnxPB(nil).str(1, kv[i]).str(2, kv[i+1]))
	}
	return t.varint(14, 1)
}

// onnxModel is a ModelProto (IR 8, opset 17) whose graph holds inits as
// initializers (5) and nodes (1).
func onnxModel(inits []onnxPB, nodes ...onnxPB) []byte {
	g := onnxPB(nil).str(2, "g")
	for _, n := range nodes {
		g = g.bytes(1, n)
	}
	for _, t := range inits {
		g = g.bytes(5, t)
	}
	m := onnxPB(nil).varint(1, 8).bytes(8, onnxPB(nil).str(1, "").varint(2, 17))
	return m.bytes(7, g)
}

func onnxFilled(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

// addedONNX stores a model of two .onnx files (one in a folder, with an
// external data file holding stale bytes) and a config.json.
func addedONNX(t *testing.T) (*store.Store, string, objects.Digest) {
	t.Helper()
	ints := onnxPB(nil).varint(1, 2).varint(2, 7).bytes(7, []byte{1, 2}) // int64_data: stays in the frame
	constant := onnxPB(nil).str(2, "k").str(4, "Constant").bytes(5, onnxPB(nil).str(1, "value").varint(20, 4).bytes(5, ints))
	files := map[string][]byte{
		"sub/a.onnx": onnxModel([]onnxPB{
			onnxTensor("a.big", 1, 1024, nil, "location", "a.bin", "offset", "7"),
			onnxTensor("a.small", 1, 4, onnxFilled(16, 2)),
		}, constant),
		"sub/a.bin":   append(onnxFilled(7, 0xee), onnxFilled(4096, 1)...),
		"b.onnx":      onnxModel([]onnxPB{onnxTensor("b.w", 10, 3000, onnxFilled(6000, 3)), onnxTensor("b.u8", 2, 100, onnxFilled(100, 4))}),
		"config.json": []byte(`{"a": 1}`),
	}
	dir := filepath.Join(t.TempDir(), "model")
	if err := testmodel.Write(dir, files); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "store"), true, store.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	res, err := archiver.Add(context.Background(), st, dir, archiver.Options{Name: "onnx"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Format != "onnx" || res.Tensors != 4 {
		t.Fatalf("added as %s with %d tensors", res.Format, res.Tensors)
	}
	return st, dir, res.Digest
}

func onnxTensorDigests(t *testing.T, st *store.Store, d objects.Digest) map[string]objects.Digest {
	t.Helper()
	var m *objects.Manifest
	if err := st.View(func(tx *bolt.Tx) (err error) { m, err = st.Manifest(tx, d); return }); err != nil {
		t.Fatal(err)
	}
	out := map[string]objects.Digest{}
	for _, tn := range m.Tensors {
		out[tn.Name] = tn.Digest
	}
	return out
}

func TestONNXRelayouts(t *testing.T) {
	st, dir, d := addedONNX(t)
	want := onnxTensorDigests(t, st, d)
	dest := filepath.Join(t.TempDir(), "same")
	if _, err := Checkout(context.Background(), st, d, dest, Options{}); err != nil {
		t.Fatal(err)
	}
	sameTree(t, dir, dest)

	for name, c := range map[string]struct {
		opts  Options
		files []string
	}{
		"external": {Options{WriteOptions: formats.WriteOptions{ExternalData: "w.data", Alignment: 64, SizeThreshold: new(int64)}}, []string{"b.onnx", "config.json", "sub/a.onnx", "sub/w.data", "w.data"}},
		"inside":   {Options{WriteOptions: formats.WriteOptions{InlineData: true}}, []string{"b.onnx", "config.json", "sub/a.onnx"}},
	} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), name)
			res, err := Checkout(context.Background(), st, d, out, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for p := range readTree(t, out) {
				got = append(got, p)
			}
			sort.Strings(got)
			if !res.Relayout || !slices.Equal(got, c.files) {
				t.Fatalf("relayout %v, files %v, want %v", res.Relayout, got, c.files)
			}
			back, err := archiver.Add(context.Background(), st, out, archiver.Options{Name: "back-" + name})
			if err != nil {
				t.Fatalf("the re-layout does not add: %v", err)
			}
			for n, dg := range onnxTensorDigests(t, st, back.Digest) {
				if want[n] != dg {
					t.Errorf("tensor %s changed", n)
				}
			}
		})
	}

	refusals := map[string]struct {
		opts  Options
		class errs.Class
	}{
		"subset":                  {Options{WriteOptions: formats.WriteOptions{ExternalData: "w.data", Tensors: []string{"a.*"}}}, errs.SchemaError},
		"data over another file":  {Options{WriteOptions: formats.WriteOptions{ExternalData: "config.json"}}, errs.SchemaError},
		"no ONNX layout option":   {Options{WriteOptions: formats.WriteOptions{Alignment: 64}}, errs.SchemaError},
		"both layouts":            {Options{WriteOptions: formats.WriteOptions{ExternalData: "w.data", InlineData: true}}, errs.SchemaError},
		"tensors in the protobuf": {Options{Format: "safetensors"}, errs.LossyConversion},
		"F16 cast of ONNX":        {Options{WriteOptions: formats.WriteOptions{InlineData: true, DType: "f16"}}, errs.SchemaError},
	}
	for name, r := range refusals {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			if _, err := Checkout(context.Background(), st, d, out, r.opts); errs.ClassOf(err) != r.class {
				t.Fatalf("got %v, want %s", err, r.class.Key())
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("refused checkout left %s", out)
			}
		})
	}

	out := filepath.Join(t.TempDir(), "st")
	res, err := Checkout(context.Background(), st, d, out, Options{Format: "safetensors", WriteOptions: formats.WriteOptions{DropNonTensors: true}})
	if err != nil {
		t.Fatalf("the tensors to SafeTensors: %v", err)
	}
	if left := strings.Join(res.LeftOut, "; "); !strings.Contains(left, "b.onnx: its graph") || !strings.Contains(left, "sub/a.onnx: 1 tensors whose data is not raw bytes") {
		t.Errorf("left out: %q", res.LeftOut)
	}
	if _, err := os.Stat(filepath.Join(out, "b.safetensors")); err != nil {
		t.Errorf("SafeTensors file not named after the first .onnx: %v", err)
	}
}

package restorer

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/safetensors"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/testmodel"
)

// halves is an expander that shows, beside every stored tensor, a tensor
// made of its first half: a view read out of the stored one.
func halves(m *objects.Manifest, opts formats.WriteOptions) ([]Expanded, error) {
	var out []Expanded
	for _, t := range m.Tensors {
		out = append(out, Expanded{Tensor: t})
		if len(t.Shape) != 2 || t.Shape[0]%2 != 0 {
			continue
		}
		from := t
		out = append(out, Expanded{
			Tensor: objects.Tensor{Name: "half." + t.Name, DType: t.DType, Shape: []int64{t.Shape[0] / 2, t.Shape[1]}, Size: t.Size / 2},
			From:   &from,
			Read:   func(src []byte) ([]byte, error) { return bytes.Clone(src[:len(src)/2]), nil },
		})
	}
	return out, nil
}

func tensorsIn(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := readTree(t, dir)
	l, err := safetensors.Codec.Parse(formattest.NewMemDir(files), formattest.ClaimedPaths(safetensors.Codec, files))
	if err != nil {
		t.Fatal(err)
	}
	data, err := formattest.TensorData(l, files)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for i, tn := range l.Tensors {
		out[tn.Name] = data[i]
	}
	return out
}

// Expanded tensors are what --tensors selects and what planners write; a
// view is read out of its stored tensor, then cast by --dtype.
func TestExpandedTensorsAreReadOutOfStoredOnes(t *testing.T) {
	st, _, d := added(t, testmodel.Spec{Layers: 1, Hidden: 16, Vocab: 64, DType: "F32", Seed: 9})
	withCodecs(t, expanding{Planner: safetensors.Codec.(formats.Planner), expand: halves})

	full := filepath.Join(t.TempDir(), "full")
	if _, err := Checkout(context.Background(), st, d, full, Options{WriteOptions: formats.WriteOptions{DType: "f16", Clamp: true}}); err != nil {
		t.Fatal(err)
	}
	views := filepath.Join(t.TempDir(), "views")
	if _, err := Checkout(context.Background(), st, d, views, Options{WriteOptions: formats.WriteOptions{Tensors: []string{"half.*"}, DType: "f16", Clamp: true}}); err != nil {
		t.Fatal(err)
	}
	fullT, viewT := tensorsIn(t, full), tensorsIn(t, views)
	if len(viewT) == 0 {
		t.Fatal("no view was written")
	}
	for name, b := range viewT {
		if !strings.HasPrefix(name, "half.") {
			t.Fatalf("--tensors half.* wrote %s", name)
		}
		whole := fullT[strings.TrimPrefix(name, "half.")]
		if !bytes.Equal(b, whole[:len(whole)/2]) {
			t.Fatalf("%s is not the first half of its stored tensor, cast to F16", name)
		}
	}
}

// A frame's CRC-32 slots are filled with the CRC of the tensor bytes
// written before them.
func TestWriterFillsCRC32Slots(t *testing.T) {
	root := t.TempDir()
	tensor := []byte("tensor bytes")
	f := planFile{path: "a.zip", size: int64(len(tensor)) + 8, pieces: []piece{
		{frame: &formats.Extent{Kind: formats.Frame, Size: int64(len(tensor)), Bytes: tensor}, size: int64(len(tensor)), tensor: 1},
		{frame: &formats.Extent{Kind: formats.Frame, Size: 8, Bytes: []byte("CRC:____"), CRC32s: []formats.CRC32Slot{{At: 4, Tensor: 0}}}, size: 8},
	}}
	if err := writeFile(context.Background(), nil, f, root, 1, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "a.zip"))
	if err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint32(b[len(tensor)+4:]); got != crc32.ChecksumIEEE(tensor) || string(b[len(tensor):len(tensor)+4]) != "CRC:" {
		t.Fatalf("frame written as %q", b[len(tensor):])
	}
}

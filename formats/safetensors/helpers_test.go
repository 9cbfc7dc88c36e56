package safetensors

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/mstore/mstore/formats"
	"github.com/mstore/mstore/formats/formattest"
	"github.com/mstore/mstore/internal/testenv"
)

// rawFile builds a file from a header taken literally (no padding) and the
// data section.
func rawFile(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

// spec is a tensor to generate: its content is a deterministic function of
// its name, so that two tensors never share bytes by accident.
type spec struct {
	name  string
	dtype string
	shape []int64
}

func (s spec) tensor(t testing.TB) formats.Tensor {
	t.Helper()
	size, err := TensorSize(s.dtype, s.shape)
	if err != nil {
		t.Fatalf("spec %s: %v", s.name, err)
	}
	return formats.Tensor{Name: s.name, DType: s.dtype, Shape: s.shape, Size: size}
}

func content(name string, size int64) []byte {
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

// generate plans specs with opts and writes the files.
func generate(t testing.TB, specs []spec, opts PlanOptions) map[string][]byte {
	t.Helper()
	tensors := make([]formats.Tensor, len(specs))
	data := make([][]byte, len(specs))
	for i, s := range specs {
		tensors[i] = s.tensor(t)
		data[i] = content(s.name, tensors[i].Size)
	}
	l, err := Plan(tensors, opts)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	files, err := formattest.Materialize(l, data)
	if err != nil {
		t.Fatalf("Materialize: %v", err)
	}
	return files
}

func parseFiles(files map[string][]byte) (*formats.Layout, error) {
	return Codec.Parse(formattest.NewMemDir(files), formattest.ClaimedPaths(Codec, files))
}

// Small generated models shared by the tests.
var (
	mixedSpecs = []spec{
		{"embed.weight", "BF16", []int64{16, 8}},
		{"layers.0.scale", "F32", []int64{8}},
		{"layers.0.packed", "F4", []int64{4, 6}},
		{"layers.0.f6", "F6_E2M3", []int64{4}},
		{"step", "I64", []int64{}},
		{"empty", "F16", []int64{0, 3}},
		{"mask", "BOOL", []int64{5}},
		{"ñame/ü", "F8_E4M3", []int64{3}},
	}
	shardSpecs = []spec{
		{"model.embed.weight", "F16", []int64{32, 4}}, // 256 bytes
		{"model.layers.0.w", "F32", []int64{16}},      // 64
		{"model.layers.0.b", "F32", []int64{16}},      // 64
		{"model.layers.1.w", "F32", []int64{40}},      // 160
		{"model.norm", "F32", []int64{4}},             // 16
		{"lm_head", "F16", []int64{200}},              // 400: over the limit alone
	}
	shardOpts = PlanOptions{MaxShardSize: 300, Metadata: map[string]string{"format": "pt"}}
)

// testdataDir finds shared/testdata/safetensors by walking up from the
// working directory; "" when it is not there.
func testdataDir() string { return formattest.SharedTestdata("safetensors") }

// realFiles returns the real third-party files by base name, or skips.
func realFiles(t testing.TB) map[string][]byte {
	t.Helper()
	dir := testdataDir()
	if dir == "" {
		testenv.Missing(t, "no shared/testdata/safetensors above the working directory: real-file checks skipped")
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil || len(paths) == 0 {
		testenv.Missing(t, "no .safetensors files in %s", dir)
	}
	sort.Strings(paths)
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

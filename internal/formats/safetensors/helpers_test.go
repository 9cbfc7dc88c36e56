package safetensors

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/testenv"
)

// rawFile builds a file from a header taken literally (no padding) and the
// data section.
func rawFile(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

// spec is a tensor to generate; its bytes are a function of its name.
type spec = formattest.Spec

// generate plans specs with opts and writes the files.
func generate(t testing.TB, specs []spec, opts PlanOptions) map[string][]byte {
	t.Helper()
	return formattest.Generate(t, specs, TensorSize, func(ts []formats.Tensor) (*formats.Layout, error) { return Plan(ts, opts) })
}

func parseFiles(files map[string][]byte) (*formats.Layout, error) {
	return Codec.Parse(formattest.NewMemDir(files), formattest.ClaimedPaths(Codec, files))
}

// Small generated models shared by the tests.
var (
	mixedSpecs = []spec{
		{Name: "embed.weight", DType: "BF16", Shape: []int64{16, 8}},
		{Name: "layers.0.scale", DType: "F32", Shape: []int64{8}},
		{Name: "layers.0.packed", DType: "F4", Shape: []int64{4, 6}},
		{Name: "layers.0.f6", DType: "F6_E2M3", Shape: []int64{4}},
		{Name: "step", DType: "I64", Shape: []int64{}},
		{Name: "empty", DType: "F16", Shape: []int64{0, 3}},
		{Name: "mask", DType: "BOOL", Shape: []int64{5}},
		{Name: "ñame/ü", DType: "F8_E4M3", Shape: []int64{3}},
	}
	shardSpecs = []spec{
		{Name: "model.embed.weight", DType: "F16", Shape: []int64{32, 4}}, // 256 bytes
		{Name: "model.layers.0.w", DType: "F32", Shape: []int64{16}},      // 64
		{Name: "model.layers.0.b", DType: "F32", Shape: []int64{16}},      // 64
		{Name: "model.layers.1.w", DType: "F32", Shape: []int64{40}},      // 160
		{Name: "model.norm", DType: "F32", Shape: []int64{4}},             // 16
		{Name: "lm_head", DType: "F16", Shape: []int64{200}},              // 400: over the limit alone
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

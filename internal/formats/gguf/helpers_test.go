package gguf

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/testenv"
)

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
		{Name: "token_embd.weight", DType: "F16", Shape: []int64{16, 8}},
		{Name: "blk.0.attn_norm.weight", DType: "F32", Shape: []int64{8}},
		{Name: "blk.0.attn_q.weight", DType: "Q4_0", Shape: []int64{4, 64}},
		{Name: "blk.0.ffn_up.weight", DType: "Q4_K", Shape: []int64{2, 256}},
		{Name: "blk.0.ffn_down.weight", DType: "BF16", Shape: []int64{3, 5}},
		{Name: "blk.0.ids", DType: "I32", Shape: []int64{7}},
		{Name: "empty", DType: "F32", Shape: []int64{0, 4}},
		{Name: "scalar", DType: "F64", Shape: []int64{}},
		{Name: "cube", DType: "I8", Shape: []int64{2, 3, 5, 7}},
		{Name: "ñame", DType: "MXFP4", Shape: []int64{32}},
	}
	mixedKVs = []KV{
		{Key: "general.architecture", Value: StringValue("llama")},
		{Key: "general.name", Value: StringValue("tiny \"test\"\n")},
		{Key: "llama.block_count", Value: Uint32Value(1)},
		{Key: "llama.rope.freq_base", Value: Float32Value(10000)},
		{Key: "tokenizer.ggml.tokens", Value: StringArray([]string{"<unk>", "<s>", "\xff\xfe", ""})},
		{Key: "tokenizer.ggml.scores", Value: ArrayValue(TypeFloat32, []uint64{0, 0x80000000, 0x7f800000, 0x7fc00001})},
		{Key: "tokenizer.ggml.add_bos_token", Value: BoolValue(true)},
		{Key: "empty.array", Value: ArrayValue(TypeInt64, nil)},
	}
)

// testdataDir finds shared/testdata/SUB by walking up from the working
// directory; "" when it is not there.
func testdataDir(sub string) string { return formattest.SharedTestdata(sub) }

// fewRealFiles are the real files tested under -short and the race
// detector: a model with tensors, and vocabularies of three kinds (BERT,
// SentencePiece with scores, BPE with merges and bools).
var fewRealFiles = map[string]bool{"llama-2-tiny-random.gguf": true, "ggml-vocab-bert-bge.gguf": true,
	"ggml-vocab-llama-spm.gguf": true, "ggml-vocab-deepseek-coder.gguf": true}

// realFiles returns the real GGUF files by base name, or skips.
func realFiles(t testing.TB) map[string][]byte {
	t.Helper()
	dir := testdataDir("gguf")
	if dir == "" {
		testenv.Missing(t, "no shared/testdata/gguf above the working directory: real-file checks skipped")
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.gguf"))
	if err != nil || len(paths) == 0 {
		testenv.Missing(t, "no .gguf files in %s", dir)
	}
	sort.Strings(paths)
	if raceEnabled || testing.Short() {
		paths = slices.DeleteFunc(paths, func(p string) bool { return !fewRealFiles[filepath.Base(p)] })
	}
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

package gguf

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/mstore/mstore/formats"
	"github.com/mstore/mstore/formats/formattest"
	"github.com/mstore/mstore/internal/testenv"
)

// spec is a tensor to generate; its bytes are a function of its name.
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
		{"token_embd.weight", "F16", []int64{16, 8}},
		{"blk.0.attn_norm.weight", "F32", []int64{8}},
		{"blk.0.attn_q.weight", "Q4_0", []int64{4, 64}},
		{"blk.0.ffn_up.weight", "Q4_K", []int64{2, 256}},
		{"blk.0.ffn_down.weight", "BF16", []int64{3, 5}},
		{"blk.0.ids", "I32", []int64{7}},
		{"empty", "F32", []int64{0, 4}},
		{"scalar", "F64", []int64{}},
		{"cube", "I8", []int64{2, 3, 5, 7}},
		{"ñame", "MXFP4", []int64{32}},
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

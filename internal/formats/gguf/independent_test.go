package gguf_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/gguf"
	"github.com/mstore/mstore/internal/formats/gguf/gguftest"
	"github.com/mstore/mstore/internal/testenv"
)

// Every file Plan writes, and every real file, reads the same with
// gpustack/gguf-parser-go as with this codec.
func TestIndependentParserAgrees(t *testing.T) {
	var kvs []gguf.KV
	for i, vt := range []gguf.ValueType{gguf.TypeUint8, gguf.TypeInt8, gguf.TypeUint16, gguf.TypeInt16, gguf.TypeUint32,
		gguf.TypeInt32, gguf.TypeFloat32, gguf.TypeBool, gguf.TypeUint64, gguf.TypeInt64, gguf.TypeFloat64} {
		key := "k." + vt.String()
		kvs = append(kvs, gguf.KV{Key: key, Value: gguf.ArrayValue(vt, []uint64{0, 1, uint64(i) & 1})})
	}
	kvs = append(kvs,
		gguf.KV{Key: "s", Value: gguf.StringValue("chat {{ template }}")},
		gguf.KV{Key: "tokens", Value: gguf.StringArray([]string{"a", "", "ü"})},
		gguf.KV{Key: "u32", Value: gguf.Uint32Value(7)}, gguf.KV{Key: "f32", Value: gguf.Float32Value(-0.5)})
	var tensors []formats.Tensor
	var data [][]byte
	for i, dt := range []string{"F32", "F16", "BF16", "F64", "I8", "I16", "I32", "I64", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
		"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S",
		"IQ4_XS", "IQ1_M", "TQ1_0", "TQ2_0", "MXFP4", "NVFP4", "Q1_0", "Q2_0"} {
		blk, _, _ := gguf.BlockSize(dt)
		shape := []int64{int64(i%3 + 1), blk * 2}
		size, err := gguf.TensorSize(dt, shape)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, formats.Tensor{Name: "t." + dt, DType: dt, Shape: shape, Size: size})
		data = append(data, make([]byte, size))
	}
	for _, shape := range [][]int64{{}, {5}, {0, 3}, {2, 1, 3, 4}} { // a scalar (n_dims 0), 1-D, empty, 4-D
		size, _ := gguf.TensorSize("F32", shape)
		tensors = append(tensors, formats.Tensor{Name: "shape." + strconv.Itoa(len(shape)), DType: "F32", Shape: shape, Size: size})
		data = append(data, make([]byte, size))
	}
	for _, opts := range []gguf.PlanOptions{
		{KVs: kvs},
		{KVs: kvs, Version: 2, Alignment: 64},
		{KVs: kvs, SplitMaxTensors: 10},
		{KVs: kvs, SplitMaxSize: 2000, Alignment: 128},
	} {
		l, err := gguf.Plan(tensors, opts)
		if err != nil {
			t.Fatal(err)
		}
		files, err := formattest.Materialize(l, data)
		if err != nil {
			t.Fatal(err)
		}
		dir := writeFiles(t, files)
		parsed, err := gguf.Codec.Parse(formattest.NewMemDir(files), formattest.ClaimedPaths(gguf.Codec, files))
		if err != nil {
			t.Fatal(err)
		}
		if err := gguftest.Check(dir, parsed); err != nil {
			t.Fatalf("%+v: %v", opts, err)
		}
	}

	// One real file: gguf-parser-go takes up to seconds on the larger
	// vocabularies (a seek per string).
	real := realDir(t)
	for _, name := range []string{"llama-2-tiny-random.gguf"} {
		p := filepath.Join(real, name)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files := map[string][]byte{filepath.Base(p): b}
		l, err := gguf.Codec.Parse(formattest.NewMemDir(files), []string{filepath.Base(p)})
		if err != nil {
			t.Fatal(err)
		}
		if err := gguftest.Check(real, l); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func writeFiles(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for p, b := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// realDir finds shared/testdata/gguf above the working directory, or skips.
func realDir(t *testing.T) string {
	t.Helper()
	dir, _ := os.Getwd()
	for {
		p := filepath.Join(dir, "shared", "testdata", "gguf")
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p
		}
		if filepath.Dir(dir) == dir {
			testenv.Missing(t, "no shared/testdata/gguf above the working directory: real files not checked")
		}
		dir = filepath.Dir(dir)
	}
}

package gguf

import (
	"strconv"
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/testenv"
)

// replan plans a parsed model again as one file, with the key/values and
// version of its first file.
func replan(parsed *formats.Layout) (*formats.Layout, error) {
	var opts PlanOptions
	if len(parsed.Files) > 0 {
		meta := parsed.Files[0].Meta
		kvs, err := DecodeKVs([]byte(meta[MetaKV]))
		if err != nil {
			return nil, err
		}
		v, _ := strconv.Atoi(meta[MetaVersion])
		opts = PlanOptions{KVs: kvs, Version: uint32(v)}
	}
	return Plan(parsed.Tensors, opts)
}

// nonZeroPadding is a generated file whose padding holds other bytes than
// zeros, which Parse must keep as frame bytes.
func nonZeroPadding(t testing.TB) map[string][]byte {
	files := generate(t, mixedSpecs[:3], PlanOptions{KVs: mixedKVs[:2], Alignment: 64})
	b := files["model.gguf"]
	l, err := parseFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Files[0].Extents {
		if e.Kind == formats.Zeros {
			b[e.Offset] = 0xaa
		}
	}
	return files
}

func TestConformance(t *testing.T) {
	generated := []formattest.Sample{
		{Name: "mixed", Files: generate(t, mixedSpecs, PlanOptions{KVs: mixedKVs})},
		{Name: "no-tensors", Files: generate(t, nil, PlanOptions{KVs: mixedKVs[:3]})},
		{Name: "v2-align-8", Files: generate(t, mixedSpecs[:4], PlanOptions{Version: 2, Alignment: 8})},
		{Name: "split-3", Files: generate(t, mixedSpecs, PlanOptions{KVs: mixedKVs, SplitMaxTensors: 4, Name: "sub/tiny"})},
		{Name: "non-zero-padding", Files: nonZeroPadding(t)},
	}
	formattest.Suite{Codec: Codec, Samples: generated, Replan: replan}.Run(t)

	// A real file: its 32,000-token vocabulary takes milliseconds to parse
	// (more under the race detector), so fewer mutations.
	name := "llama-2-tiny-random.gguf"
	b, ok := realFiles(t)[name]
	if !ok {
		testenv.Missing(t, "%s is not in shared/testdata/gguf", name)
	}
	truncations, flips := 48, 128
	if raceEnabled {
		truncations, flips = 16, 32
	}
	formattest.Suite{Codec: Codec, Samples: []formattest.Sample{{Name: name, Files: map[string][]byte{name: b}}},
		Replan: replan, MaxTruncations: truncations, MaxBitFlips: flips}.Run(t)
}

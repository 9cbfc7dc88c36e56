package safetensors

import (
	"encoding/binary"
	"testing"

	"github.com/mstore/mstore/internal/formats/formattest"
)

// maxFuzzZeros bounds the zero bytes a fuzz input may append; the real
// files' data sections are below it.
const maxFuzzZeros = 2 << 20

// maxReplanSize bounds the files whose tensors are planned again: the
// round trip copies the data several times, and the fuzzer minimizes every
// new input by running it thousands of times, so big inputs would stall it.
const maxReplanSize = 64 << 10

// FuzzParse parses frame followed by zeros zero bytes (the data section:
// Parse never reads it, and keeping it out of the input keeps inputs small
// enough for the fuzzer to mutate and minimize), alone or, when index is
// not empty, as the one shard of a sharded model with that index.
//
// Whatever the bytes: no panic, every error has a class, every accepted
// layout covers its files exactly, and (for files up to maxReplanSize) its
// tensors can be planned again into a file that parses back to the same
// tensors.
func FuzzParse(f *testing.F) {
	for _, b := range fuzzSeedFiles(f) {
		frame, zeros := splitFrame(b)
		f.Add(frame, zeros, []byte(nil))
	}
	small := generate(f, mixedSpecs[:3], PlanOptions{})["model.safetensors"]
	f.Add(small, uint32(0), []byte(`{"metadata": {"total_size": 300}, "weight_map": {"embed.weight": "model-00001-of-00001.safetensors", "layers.0.scale": "model-00001-of-00001.safetensors", "layers.0.packed": "model-00001-of-00001.safetensors"}}`))
	f.Add([]byte(oneTensor), uint32(8), []byte(`{"weight_map": {"a": "../model-00001-of-00001.safetensors"}}`))

	f.Fuzz(func(t *testing.T, frame []byte, zeros uint32, index []byte) {
		file := make([]byte, len(frame)+int(zeros%maxFuzzZeros))
		copy(file, frame)
		files := map[string][]byte{"model.safetensors": file}
		if len(index) > 0 {
			files = map[string][]byte{"model-00001-of-00001.safetensors": file, indexPath: index}
		}
		l, err := parseFiles(files)
		if !formattest.CheckParsed(t, l, err, files) {
			return
		}
		if len(file) > maxReplanSize {
			return
		}
		formattest.CheckReplanned(t, l, files, replan, parseFiles)
	})
}

// splitFrame cuts a valid file into its frame and the length of its data
// section, which the fuzz target refills with zeros.
func splitFrame(b []byte) ([]byte, uint32) {
	n := binary.LittleEndian.Uint64(b)
	end := lengthPrefix + int(n)
	return b[:end], uint32(len(b) - end)
}

// fuzzSeedFiles are small generated files and, when present, the real ones.
func fuzzSeedFiles(f *testing.F) [][]byte {
	seeds := [][]byte{
		generate(f, mixedSpecs, PlanOptions{Metadata: map[string]string{"format": "pt"}})["model.safetensors"],
		generate(f, nil, PlanOptions{})["model.safetensors"],
		rawFile(`{"__metadata__":null,"b":{"shape":[1],"data_offsets":[4,5],"dtype":"U8"},"a":{"data_offsets":[0,4],"dtype":"I32","shape":[]}}   `, make([]byte, 5)),
		rawFile(`{"z":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"a\u00e9\"":{"dtype":"F4","shape":[2,3],"data_offsets":[0,3]}}`, make([]byte, 3)),
	}
	if testdataDir() != "" {
		for _, b := range realFiles(f) {
			seeds = append(seeds, b)
		}
	}
	return seeds
}

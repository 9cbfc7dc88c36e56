package onnx

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/objects"
)

// maxFuzzSeed bounds the real models used as seeds: the fuzzer mutates and
// minimizes every input thousands of times.
const maxFuzzSeed = 96 << 10

// maxFuzzReplan bounds the inputs whose tensors are planned again.
const maxFuzzReplan = 64 << 10

// FuzzParse parses model as model.onnx beside one more file (dataName,
// data), which its external data may name.
//
// Whatever the bytes: no panic, every error has a class, every accepted
// layout covers its files exactly, and (for small inputs) its tensors can
// be planned again, inside and into external data, into files that parse
// back to the same tensors.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s.model, s.dataName, s.data)
	}
	f.Fuzz(func(t *testing.T, model []byte, dataName string, data []byte) {
		files := map[string][]byte{"model.onnx": model}
		if objects.IsCleanPath(dataName) && dataName != "model.onnx" && !Codec.Claims(dataName) {
			files[dataName] = data
		}
		l, err := formattest.ParseRecovering(Codec, files, []string{"model.onnx"})
		if !formattest.CheckParsed(t, l, err, files) {
			return
		}
		if len(model)+len(data) > maxFuzzReplan {
			return
		}
		tensors, err := formattest.TensorData(l, files)
		if err != nil {
			t.Fatal(err)
		}
		for _, opts := range []PlanOptions{{}, {ExternalData: "fuzz.data", SizeThreshold: 1, Alignment: 16}} {
			planned, err := Plan(sourceFiles(l, files), l.Tensors, opts)
			if err != nil {
				if errs.ClassOf(err) == errs.SchemaError && opts.ExternalData != "" {
					continue // e.g. fuzz.data is already a file of the model
				}
				t.Fatalf("accepted tensors cannot be planned again (%+v): %v", opts, err)
			}
			written, err := formattest.Materialize(planned, tensors)
			if err != nil {
				t.Fatal(err)
			}
			back, err := formattest.ParseRecovering(Codec, written, formattest.ClaimedPaths(Codec, written))
			if err != nil {
				t.Fatalf("planned files do not parse (%+v): %v", opts, err)
			}
			if err := formattest.SameTensors(l, tensors, back, written); err != nil {
				t.Fatalf("planned files hold other tensors (%+v): %v", opts, err)
			}
		}
	})
}

type fuzzSeed struct {
	model    []byte
	dataName string
	data     []byte
}

// fuzzSeeds are small generated models and the small real ones, each with
// the first data file its folder holds.
func fuzzSeeds(f *testing.F) []fuzzSeed {
	data := f32(4)
	seeds := []fuzzSeed{
		{modelMsg(graphMsg(rawTensor("w", typeFloat, data, 4))), "", nil},
		{extModel("location", "w.bin", "offset", "4", "length", "12"), "w.bin", append([]byte{9, 9, 9, 9}, data[:12]...)},
		{nested(5), "", nil},
		{modelMsg(graphMsg(tensorMsg("f", typeFloat, 4).bytes(tensorFloatData, data))), "", nil},
	}
	root := testdataDir()
	if root == "" {
		return seeds
	}
	var models []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".onnx") {
			models = append(models, p)
		}
		return nil
	})
	sort.Strings(models)
	for _, p := range models {
		b, err := os.ReadFile(p)
		if err != nil || len(b) > maxFuzzSeed {
			continue
		}
		s := fuzzSeed{model: b}
		// The data file named like the model, if there is one.
		stem := strings.TrimSuffix(filepath.Base(p), ".onnx")
		if d, err := os.ReadFile(filepath.Join(filepath.Dir(p), stem+".bin")); err == nil && len(d) <= maxFuzzSeed {
			s.dataName, s.data = stem+".bin", d
		}
		seeds = append(seeds, s)
	}
	return seeds
}

package onnx

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/testenv"
)

// TestRealModelsConformance runs the shared suite on every real model:
// byte-identical reassembly (external data files with their stale bytes
// included), truncations and bit flips, and a replan into external data.
func TestRealModelsConformance(t *testing.T) {
	for _, sample := range realSamples(t) {
		// Each mutant of a 2 MB model is walked whole: fewer of them for
		// the big models keep the suite fast under the race detector.
		truncations, flips := 256, 2048
		for _, b := range sample.Files {
			if len(b) > 64<<10 {
				truncations, flips = 64, 384
			}
		}
		t.Run(sample.Name, func(t *testing.T) {
			formattest.Suite{
				Codec:   Codec,
				Samples: []formattest.Sample{sample},
				Replan: func(parsed *formats.Layout) (*formats.Layout, error) {
					return Plan(sourceFiles(parsed, sample.Files), parsed.Tensors, PlanOptions{ExternalData: "model.data", SizeThreshold: 64})
				},
				MaxTruncations: truncations,
				MaxBitFlips:    flips,
			}.Run(t)
		})
	}
}

// TestRealModelsRelayout lays every real model out again in three ways and
// checks each against a fresh parse: all inside, external with ONNX
// Runtime's alignment, and external with every tensor aligned; then back
// inside, which must give the first result byte for byte.
func TestRealModelsRelayout(t *testing.T) {
	for _, sample := range realSamples(t) {
		t.Run(sample.Name, func(t *testing.T) {
			paths := formattest.ClaimedPaths(Codec, sample.Files)
			l, err := parseFiles(sample.Files)
			if err != nil {
				t.Fatalf("real model refused: %v", err)
			}
			data, err := formattest.TensorData(l, sample.Files)
			if err != nil {
				t.Fatal(err)
			}
			check := func(name string, planned *formats.Layout, written map[string][]byte) *formats.Layout {
				t.Helper()
				back, err := parseFiles(written)
				if err != nil {
					t.Fatalf("%s: written files do not parse: %v", name, err)
				}
				if err := formattest.SameTensors(l, data, back, written); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				checkSameLayout(t, back, planned)
				return back
			}
			inside, insideFiles := replan(t, l, sample.Files, PlanOptions{})
			check("inside", inside, insideFiles)
			if len(inside.Files) != len(paths) {
				t.Errorf("inside: %d files, want only the .onnx files %v", len(inside.Files), paths)
			}

			ext, extFiles := replan(t, l, sample.Files, PlanOptions{ExternalData: "weights.data"})
			back := check("external", ext, extFiles)
			checkAlignment(t, back, func(size int64) int64 {
				if size >= AlignThreshold {
					return DefaultAlignment
				}
				return 1
			})

			aligned, alignedFiles := replan(t, l, sample.Files, PlanOptions{ExternalData: "weights.data", Alignment: 64, SizeThreshold: 1})
			back = check("aligned", aligned, alignedFiles)
			checkAlignment(t, back, func(int64) int64 { return 64 })

			again, againFiles := replan(t, back, alignedFiles, PlanOptions{})
			check("inside again", again, againFiles)
			for p, b := range insideFiles {
				if !bytes.Equal(againFiles[p], b) {
					t.Errorf("%s: inside → external → inside differs from inside", p)
				}
			}
		})
	}
}

// TestRawModelsPlanToThemselves: a model whose tensors are all raw_data
// inside, in field order, is planned inside to its own bytes.
func TestRawModelsPlanToThemselves(t *testing.T) {
	same := 0
	for _, sample := range realSamples(t) {
		l, err := parseFiles(sample.Files)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Files) != 1 || strings.Contains(sample.Name, "light_") {
			continue // external data, or float_data (which becomes raw_data)
		}
		_, written := replan(t, l, sample.Files, PlanOptions{})
		p := l.Files[0].Path
		if !bytes.Equal(written[p], sample.Files[p]) {
			t.Errorf("%s: planned inside, the bytes differ from the original", sample.Name)
		}
		same++
	}
	if same == 0 {
		testenv.Missing(t, "no single-file real model")
	}
}

// checkSameLayout compares a parsed layout with the planned one, as the
// restorer's verification does.
func checkSameLayout(t *testing.T, got, want *formats.Layout) {
	t.Helper()
	if len(got.Files) != len(want.Files) {
		t.Fatalf("%d files parsed, %d planned", len(got.Files), len(want.Files))
	}
	for i, gf := range got.Files {
		wf := want.Files[i]
		if gf.Path != wf.Path || gf.Size != wf.Size || len(gf.Extents) != len(wf.Extents) {
			t.Fatalf("file %s (%d bytes, %d extents), planned %s (%d bytes, %d extents)", gf.Path, gf.Size, len(gf.Extents), wf.Path, wf.Size, len(wf.Extents))
		}
		for j, ge := range gf.Extents {
			we := wf.Extents[j]
			if ge.Kind != we.Kind || ge.Offset != we.Offset || ge.Size != we.Size || ge.Kind == formats.TensorData && got.Tensors[ge.Tensor].Name != want.Tensors[we.Tensor].Name {
				t.Fatalf("%s: extent %d parsed %+v, planned %+v", gf.Path, j, ge, we)
			}
		}
	}
	for i := range got.Tensors {
		g, w := got.Tensors[i], want.Tensors[i]
		if g.Name != w.Name || g.DType != w.DType || g.Size != w.Size {
			t.Fatalf("tensor %d parsed %+v, planned %+v", i, g, w)
		}
	}
}

// checkAlignment checks the offsets of the tensors in data files.
func checkAlignment(t *testing.T, l *formats.Layout, align func(size int64) int64) {
	t.Helper()
	for _, f := range l.Files {
		if Codec.Claims(f.Path) {
			continue
		}
		for _, e := range f.Extents {
			if e.Kind == formats.TensorData && e.Offset%align(e.Size) != 0 {
				t.Errorf("%s: tensor %q of %d bytes at offset %d, not a multiple of %d", f.Path, l.Tensors[e.Tensor].Name, e.Size, e.Offset, align(e.Size))
			}
		}
	}
}

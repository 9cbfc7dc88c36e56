package safetensors

import (
	"bytes"
	"maps"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/testenv"
)

// TestRealFilesRoundTrip parses every real third-party file, rebuilds it
// from its extents, then plans a canonical file from its tensors and checks
// that this parses back to the same tensors, bytes and metadata.
func TestRealFilesRoundTrip(t *testing.T) {
	canonical := 0
	real := realFiles(t)
	for name, orig := range real {
		t.Run(name, func(t *testing.T) {
			files := map[string][]byte{name: orig}
			l, err := parseFiles(files)
			if err != nil {
				t.Fatalf("real file refused: %v", err)
			}
			if err := formattest.CheckLayout(l, files); err != nil {
				t.Fatal(err)
			}
			var rebuilt []byte
			for _, e := range l.Files[0].Extents {
				rebuilt = append(rebuilt, orig[e.Offset:e.Offset+e.Size]...)
			}
			if !bytes.Equal(rebuilt, orig) {
				t.Fatal("file rebuilt from its extents differs")
			}
			data, err := formattest.TensorData(l, files)
			if err != nil {
				t.Fatal(err)
			}
			meta := l.Files[0].Meta
			planned, err := Plan(l.Tensors, PlanOptions{Metadata: meta, Name: strings.TrimSuffix(name, ".safetensors")})
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			written, err := formattest.Materialize(planned, data)
			if err != nil {
				t.Fatal(err)
			}
			back, err := parseFiles(written)
			if err != nil {
				t.Fatalf("planned file does not parse: %v", err)
			}
			if err := formattest.SameTensors(l, data, back, written); err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(back.Files[0].Meta, meta) {
				t.Errorf("metadata %v, want %v", back.Files[0].Meta, meta)
			}
			checkSameLayout(t, back, planned)
			if bytes.Equal(written[name], orig) {
				canonical++
			}
		})
	}
	t.Logf("%d of %d real files are byte-identical to what Plan writes for their tensor order", canonical, len(real))
}

func TestConformance(t *testing.T) {
	samples := []formattest.Sample{
		{Name: "mixed dtypes", Files: generate(t, mixedSpecs, PlanOptions{Metadata: map[string]string{"format": "pt"}})},
		{Name: "sharded", Files: generate(t, shardSpecs, shardOpts)},
		{Name: "empty", Files: generate(t, nil, PlanOptions{})},
		{Name: "independent files", Files: map[string][]byte{
			"a.safetensors":     rawFile(oneTensor, make([]byte, 8)),
			"sub/b.safetensors": rawFile(`{"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{7}),
		}},
		{Name: "null metadata, any order, padding", Files: single(
			`{"__metadata__":null,"b":{"shape":[1],"data_offsets":[4,5],"dtype":"U8"},"a":{"data_offsets":[0,4],"dtype":"I32","shape":[]}}   `, 5)},
	}
	if dir := testdataDir(); dir != "" {
		for name, b := range realFiles(t) {
			samples = append(samples, formattest.Sample{Name: name, Files: map[string][]byte{name: b}})
		}
	} else {
		testenv.Degraded(t, "no shared/testdata/safetensors: conformance runs on generated samples only")
	}
	formattest.Suite{Codec: Codec, Samples: samples, Replan: replan}.Run(t)
}

// replan writes the parsed tensors as one canonical file with the metadata
// of the first file, as a checkout to another layout would.
func replan(parsed *formats.Layout) (*formats.Layout, error) {
	var meta map[string]string
	for _, f := range parsed.Files {
		if !f.Index {
			meta = f.Meta
			break
		}
	}
	return Plan(parsed.Tensors, PlanOptions{Metadata: meta})
}

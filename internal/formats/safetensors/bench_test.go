package safetensors

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
)

// manyTensors is a MoE-like model: n small tensors with long names.
func manyTensors(n int) []formats.Tensor {
	out := make([]formats.Tensor, n)
	for i := range out {
		out[i] = formats.Tensor{
			Name:  fmt.Sprintf("model.layers.%d.mlp.experts.%d.down_proj.weight", i/256, i%256),
			DType: "BF16", Shape: []int64{2, 2}, Size: 8,
		}
	}
	return out
}

func BenchmarkPlan100kTensors(b *testing.B) {
	tensors := manyTensors(100_000)
	for b.Loop() {
		if _, err := Plan(tensors, PlanOptions{MaxShardSize: 80_000}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse100kTensors(b *testing.B) {
	tensors := manyTensors(100_000)
	l, err := Plan(tensors, PlanOptions{MaxShardSize: 80_000})
	if err != nil {
		b.Fatal(err)
	}
	data := make([][]byte, len(tensors))
	for i := range data {
		data[i] = make([]byte, 8)
	}
	files, err := formattest.Materialize(l, data)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(l.Files)), "files")
	for b.Loop() {
		if _, err := parseFiles(files); err != nil {
			b.Fatal(err)
		}
	}
}

// oneFile100k is bench/perf.sh's "small" model: one file of 100,000
// tensors of 512 B, whose 10 MB header is most of the work of a parse.
func oneFile100k(b *testing.B) map[string][]byte {
	tensors := make([]formats.Tensor, 100_000)
	for i := range tensors {
		tensors[i] = formats.Tensor{Name: fmt.Sprintf("model.layers.%d.block.%d.weight", i/100, i%100), DType: "F32", Shape: []int64{128}, Size: 512}
	}
	l, err := Plan(tensors, PlanOptions{})
	if err != nil {
		b.Fatal(err)
	}
	data := make([][]byte, len(tensors))
	for i := range data {
		data[i] = make([]byte, 512)
	}
	files, err := formattest.Materialize(l, data)
	if err != nil {
		b.Fatal(err)
	}
	return files
}

func BenchmarkParseOneFile100kTensors(b *testing.B) {
	files := oneFile100k(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseFiles(files); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseHeader100kTensors parses the header alone of oneFile100k:
// serially, and as parseHeader does (in parts, one per core).
func BenchmarkParseHeader100kTensors(b *testing.B) {
	file := oneFile100k(b)["model.safetensors"]
	hdr := file[lengthPrefix : lengthPrefix+binary.LittleEndian.Uint64(file)]
	dataLen := int64(len(file) - lengthPrefix - len(hdr))
	for _, c := range []struct {
		name string
		f    func(string, []byte, int64, *formats.Budget) (*header, error)
	}{{"serial", parseSerial}, {"split", parseHeader}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.f("m.safetensors", hdr, dataLen, formats.Limits{}.Budget(pkg, "m.safetensors", int64(len(hdr)))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

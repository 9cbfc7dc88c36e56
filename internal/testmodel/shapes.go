package testmodel

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/safetensors"
)

// Shapes of generated models for benchmarks (bench/, go test -bench): the
// tensor counts and sizes that stress a store differently.

// ManySmall is n tensors of size bytes each (F32), all distinct: the
// per-tensor costs of a store, with almost no bytes to move.
func ManySmall(n int, size int64) []formats.Tensor {
	out := make([]formats.Tensor, n)
	for i := range out {
		out[i] = formats.Tensor{Name: fmt.Sprintf("model.layers.%d.block.%d.weight", i/100, i%100),
			DType: "F32", Shape: []int64{size / 4}, Size: size}
	}
	return out
}

// MoE is a mixture-of-experts decoder's tensors (BF16): per layer four
// attention projections, two norms and three projections per expert, plus
// an embedding and a final norm.
func MoE(layers, experts int, hidden, inter int64) []formats.Tensor {
	var out []formats.Tensor
	add := func(name string, shape ...int64) {
		n := int64(2)
		for _, d := range shape {
			n *= d
		}
		out = append(out, formats.Tensor{Name: name, DType: "BF16", Shape: shape, Size: n})
	}
	add("model.embed_tokens.weight", 32000, hidden)
	for l := range layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", hidden)
		for _, w := range []string{"q", "k", "v", "o"} {
			add(p+"self_attn."+w+"_proj.weight", hidden, hidden)
		}
		add(p+"post_attention_layernorm.weight", hidden)
		for e := range experts {
			q := fmt.Sprintf("%smlp.experts.%d.", p, e)
			add(q+"gate_proj.weight", inter, hidden)
			add(q+"up_proj.weight", inter, hidden)
			add(q+"down_proj.weight", hidden, inter)
		}
	}
	add("model.norm.weight", hidden)
	return out
}

// Dense is a plain decoder with few large tensors (F16, tied embeddings).
func Dense(layers int, hidden, vocab int64) []formats.Tensor {
	s := Spec{Layers: layers, Hidden: int(hidden), Vocab: int(vocab), DType: "F16"}
	t := s.Tensors()
	return t[:len(t)-1] // no lm_head
}

// WriteTensors writes tensors as a SafeTensors model under dir (sharded at
// maxShard when > 0), tensor bytes pseudo-random from seed, streamed to
// the files so that a model of gigabytes needs no such memory.
func WriteTensors(dir string, tensors []formats.Tensor, maxShard int64, seed uint64) error {
	l, err := safetensors.Plan(tensors, safetensors.PlanOptions{MaxShardSize: maxShard, Metadata: map[string]string{"format": "pt"}})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for _, f := range l.Files {
		out, err := os.Create(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			return err
		}
		w := bufio.NewWriterSize(out, 1<<20)
		for _, e := range f.Extents {
			switch e.Kind {
			case formats.Frame:
				w.Write(e.Bytes)
			case formats.Zeros:
				w.Write(make([]byte, e.Size))
			case formats.TensorData:
				r := rand.New(rand.NewPCG(seed, uint64(e.Tensor)))
				for left := e.Size; left > 0; {
					n := min(left, int64(len(buf)))
					for j := int64(0); j < n; j += 8 {
						v := r.Uint64()
						for k := int64(0); k < 8 && j+k < n; k++ {
							buf[j+k] = byte(v >> (8 * k))
						}
					}
					w.Write(buf[:n])
					left -= n
				}
			}
		}
		if err := w.Flush(); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), []byte("{\n  \"model_type\": \"bench\"\n}\n"), 0o644)
}

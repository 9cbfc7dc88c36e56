// Package testmodel builds small, deterministic model directories (a
// llama-like tensor set in SafeTensors, sharded or not, with config.json and
// tokenizer files) for the examples and the tests. Everything is written by
// mstore's own SafeTensors planner.
package testmodel

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/safetensors"
)

// Spec describes a model to build.
type Spec struct {
	Layers int
	Hidden int
	Vocab  int
	// MaxShardSize > 0 writes shards with an index, as save_pretrained does.
	MaxShardSize int64
	DType        string // "F32", "F16" or "BF16"
	Seed         uint64
}

// Tiny is the example model shipped in examples/tiny.
var Tiny = Spec{Layers: 2, Hidden: 32, Vocab: 256, MaxShardSize: 40_000, DType: "F16", Seed: 1}

var dtypeSize = map[string]int64{"F32": 4, "F16": 2, "BF16": 2}

// Tensors lists the model's tensors in the order they are written.
func (s Spec) Tensors() []formats.Tensor {
	h, v := int64(s.Hidden), int64(s.Vocab)
	var out []formats.Tensor
	add := func(name string, shape ...int64) {
		n := dtypeSize[s.DType]
		for _, d := range shape {
			n *= d
		}
		out = append(out, formats.Tensor{Name: name, DType: s.DType, Shape: shape, Size: n})
	}
	add("model.embed_tokens.weight", v, h)
	for l := range s.Layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", h)
		add(p+"self_attn.q_proj.weight", h, h)
		add(p+"self_attn.k_proj.weight", h, h)
		add(p+"self_attn.v_proj.weight", h, h)
		add(p+"self_attn.o_proj.weight", h, h)
		add(p+"post_attention_layernorm.weight", h)
		add(p+"mlp.gate_proj.weight", 2*h, h)
		add(p+"mlp.up_proj.weight", 2*h, h)
		add(p+"mlp.down_proj.weight", h, 2*h)
	}
	add("model.norm.weight", h)
	add("lm_head.weight", v, h)
	return out
}

// Build returns the model's files, path → bytes. Tensor bytes are
// pseudo-random from Seed and each tensor's position, so that two specs
// that differ only in Seed share no tensor.
func (s Spec) Build() (map[string][]byte, error) {
	return s.BuildWith(nil)
}

// BuildWith is Build with fill, when non-nil, choosing each tensor's bytes.
func (s Spec) BuildWith(fill func(i int, t formats.Tensor, b []byte)) (map[string][]byte, error) {
	tensors := s.Tensors()
	l, err := safetensors.Plan(tensors, safetensors.PlanOptions{MaxShardSize: s.MaxShardSize, Metadata: map[string]string{"format": "pt"}})
	if err != nil {
		return nil, err
	}
	data := make([][]byte, len(tensors))
	for i, t := range tensors {
		data[i] = make([]byte, t.Size)
		if fill != nil {
			fill(i, t, data[i])
			continue
		}
		r := rand.New(rand.NewPCG(s.Seed, uint64(i)))
		for j := range data[i] {
			data[i][j] = byte(r.Uint32())
		}
	}
	files := map[string][]byte{}
	for _, f := range l.Files {
		b := make([]byte, 0, f.Size)
		for _, e := range f.Extents {
			switch e.Kind {
			case formats.Frame:
				b = append(b, e.Bytes...)
			case formats.TensorData:
				b = append(b, data[e.Tensor]...)
			case formats.Zeros:
				b = append(b, make([]byte, e.Size)...)
			}
		}
		files[f.Path] = b
	}
	torchDType := map[string]string{"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[s.DType]
	cfg, _ := json.MarshalIndent(map[string]any{
		"architectures": []string{"LlamaForCausalLM"}, "model_type": "llama",
		"hidden_size": s.Hidden, "intermediate_size": 2 * s.Hidden, "num_hidden_layers": s.Layers,
		"vocab_size": s.Vocab, "torch_dtype": torchDType,
	}, "", "  ")
	files["config.json"] = append(cfg, '\n')
	files["generation_config.json"] = []byte("{\n  \"bos_token_id\": 1,\n  \"eos_token_id\": 2\n}\n")
	vocab := map[string]int{}
	for i := range s.Vocab {
		vocab[fmt.Sprintf("tok%d", i)] = i
	}
	tok, _ := json.Marshal(map[string]any{"version": "1.0", "model": map[string]any{"type": "BPE", "vocab": vocab}})
	files["tokenizer.json"] = tok
	return files, nil
}

// Write writes files under dir.
func Write(dir string, files map[string][]byte) error {
	for p, b := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

package gguf

import (
	"regexp"
	"strings"
)

// Architectures this package converts: HF "architectures" → GGUF
// general.architecture.
var archOf = map[string]string{
	"LlamaForCausalLM":   "llama",
	"MistralForCausalLM": "llama", // convert_hf_to_gguf.py writes mistral as llama
	"Qwen2ForCausalLM":   "qwen2",
}

// hfOfArch is the HF architecture a GGUF architecture converts back to.
var hfOfArch = map[string]string{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}

// Per-layer names: HF suffix after "model.layers.N." → GGUF suffix after
// "blk.N." (gguf-py tensor_mapping.py, MODEL_TENSOR ATTN_*, FFN_*).
var layerNames = [][2]string{
	{"input_layernorm.weight", "attn_norm.weight"},
	{"self_attn.q_proj.weight", "attn_q.weight"},
	{"self_attn.k_proj.weight", "attn_k.weight"},
	{"self_attn.v_proj.weight", "attn_v.weight"},
	{"self_attn.o_proj.weight", "attn_output.weight"},
	{"self_attn.q_proj.bias", "attn_q.bias"},
	{"self_attn.k_proj.bias", "attn_k.bias"},
	{"self_attn.v_proj.bias", "attn_v.bias"},
	{"self_attn.o_proj.bias", "attn_output.bias"},
	{"post_attention_layernorm.weight", "ffn_norm.weight"},
	{"mlp.gate_proj.weight", "ffn_gate.weight"},
	{"mlp.up_proj.weight", "ffn_up.weight"},
	{"mlp.down_proj.weight", "ffn_down.weight"},
}

var globalNames = [][2]string{
	{"model.embed_tokens.weight", "token_embd.weight"},
	{"model.norm.weight", "output_norm.weight"},
	{"lm_head.weight", "output.weight"},
}

var (
	hfLayer   = regexp.MustCompile(`^model\.layers\.(\d+)\.(.+)$`)
	ggufLayer = regexp.MustCompile(`^blk\.(\d+)\.(.+)$`)
)

// GGUFName is the GGUF name of an HF tensor; skip says the converter
// drops it (rotary inv_freq buffers, recomputed by llama.cpp); ok false
// says the name is not one of the architecture's.
func GGUFName(hf string) (name string, skip, ok bool) {
	if strings.HasSuffix(hf, ".rotary_emb.inv_freq") {
		return "", true, true
	}
	for _, g := range globalNames {
		if hf == g[0] {
			return g[1], false, true
		}
	}
	if m := hfLayer.FindStringSubmatch(hf); m != nil {
		for _, l := range layerNames {
			if m[2] == l[0] {
				return "blk." + m[1] + "." + l[1], false, true
			}
		}
	}
	return "", false, false
}

// HFName is the HF name of a GGUF tensor, the inverse of GGUFName.
func HFName(g string) (string, bool) {
	for _, n := range globalNames {
		if g == n[1] {
			return n[0], true
		}
	}
	if m := ggufLayer.FindStringSubmatch(g); m != nil {
		for _, l := range layerNames {
			if m[2] == l[1] {
				return "model.layers." + m[1] + "." + l[0], true
			}
		}
	}
	return "", false
}

// permutedHeads says whether a GGUF tensor of arch is q/k-permuted, and
// with how many heads: q with head_count, k with head_count_kv.
func permutedHeads(arch, ggufName string, heads, headsKV int) (int, bool) {
	if arch != "llama" {
		return 0, false
	}
	switch {
	case strings.HasSuffix(ggufName, ".attn_q.weight"), strings.HasSuffix(ggufName, ".attn_q.bias"):
		return heads, true
	case strings.HasSuffix(ggufName, ".attn_k.weight"), strings.HasSuffix(ggufName, ".attn_k.bias"):
		return headsKV, true
	}
	return 0, false
}

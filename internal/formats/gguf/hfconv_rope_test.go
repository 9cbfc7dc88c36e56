package gguf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/testenv"
)

// TestLlama3RopeFreqsMatchConverter: rope_freqs.weight for llama3 rope
// scaling equals what LlamaModel.generate_extra_tensors of
// convert_hf_to_gguf.py computes, run by python3-torch, for real and
// small configurations; no key/value is written for it.
func TestLlama3RopeFreqsMatchConverter(t *testing.T) {
	py := "/usr/bin/python3"
	if exec.Command(py, "-c", "import torch").Run() != nil {
		testenv.Missing(t, "%s with torch is missing (python3-torch)", py)
	}
	script := `import sys, json, math, torch
hp = json.loads(sys.argv[1]); rope_scaling = hp["rope_scaling"]
base = hp.get("rope_theta", 10000.0)
if (dim := hp.get("head_dim")) is None:
    dim = hp["hidden_size"] // hp["num_attention_heads"]
freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
factor = rope_scaling.get("factor", 8.0)
low_freq_factor = rope_scaling.get("low_freq_factor", 1.0)
high_freq_factor = rope_scaling.get("high_freq_factor", 4.0)
old_context_len = hp.get("original_max_position_embeddings", 8192)
low_freq_wavelen = old_context_len / low_freq_factor
high_freq_wavelen = old_context_len / high_freq_factor
rope_factors = []
for freq in freqs:
    wavelen = 2 * math.pi / freq
    if wavelen < high_freq_wavelen:
        rope_factors.append(1)
    elif wavelen > low_freq_wavelen:
        rope_factors.append(factor)
    else:
        smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
        rope_factors.append(1 / ((1 - smooth) / factor + smooth))
sys.stdout.buffer.write(torch.tensor(rope_factors, dtype=torch.float32).numpy().tobytes())`
	for _, cfg := range []string{
		// Llama 3.1 8B's
		`{"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000.0, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}}`,
		// Llama 3.2 1B's, with an explicit head_dim
		`{"hidden_size": 2048, "num_attention_heads": 32, "head_dim": 64, "rope_theta": 500000.0, "rope_scaling": {"factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}}`,
		// small, with defaults and a top-level original context length
		`{"hidden_size": 64, "num_attention_heads": 2, "original_max_position_embeddings": 64, "rope_scaling": {"rope_type": "llama3", "factor": 2.0}}`,
	} {
		want, err := exec.Command(py, "-c", script, cfg).Output()
		if err != nil {
			t.Fatal(err)
		}
		c, err := parseConfig([]byte(cfg))
		if err != nil {
			t.Fatal(err)
		}
		var hp hparams
		json.Unmarshal(c.Fields["hidden_size"], &hp.hidden)
		json.Unmarshal(c.Fields["num_attention_heads"], &hp.heads)
		kvs, freqs, err := ropeScalingKVs("llama", "llama.", c, hp)
		if err != nil || len(kvs) != 0 {
			t.Fatalf("%s: %v, key/values %s", cfg, err, EncodeKVs(kvs))
		}
		if got := f32Bytes(freqs); !bytes.Equal(got, want) {
			t.Errorf("%s: rope_freqs differ from the converter's:\n got %v\nwant %d bytes", cfg, freqs, len(want))
		}
	}
	// qwen2's converter has no llama3 rope scaling: refused, not dropped.
	c, _ := parseConfig([]byte(`{"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}`))
	if _, _, err := ropeScalingKVs("qwen2", "qwen2.", c, hparams{hidden: 64, heads: 2}); errs.ClassOf(err) != errs.UnsupportedVersion {
		t.Fatalf("qwen2 with llama3 rope scaling: %v", err)
	}
}

// TestModelNameAsConverter: general.name as gguf-py's metadata heuristics
// make it from _name_or_path and the directory's name.
func TestModelNameAsConverter(t *testing.T) {
	for _, c := range []struct {
		nameOrPath *string
		dir, want  string
	}{
		{strPtr("meta-llama/Llama-3.1-8B-Instruct"), "x", "Llama 3.1 8B Instruct"},
		{strPtr("Qwen/qwen2.5-0.5b-instruct"), "x", "Qwen2.5 0.5b Instruct"},
		{strPtr("/home/me/models/llama"), "tinyllama-1.1b-chat-v1.0", "Tinyllama 1.1b Chat v1.0"},
		{nil, "mistral-7b-v0.1", "Mistral 7b v0.1"},
		{nil, "", "fallback"},
		{strPtr("my model"), "x", "My Model"},
	} {
		cfg := []byte(`{}`)
		if c.nameOrPath != nil {
			cfg = []byte(fmt.Sprintf(`{"_name_or_path": %q}`, *c.nameOrPath))
		}
		if got := ModelName(cfg, c.dir, "fallback"); got != c.want {
			t.Errorf("%s in %q: %q, want %q", cfg, c.dir, got, c.want)
		}
	}
}

func strPtr(s string) *string { return &s }

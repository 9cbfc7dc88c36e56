package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/formats/gguf"
)

// TestLlamaCppRunsHFConversions: HF directories (llama with a
// SentencePiece tokenizer.model, qwen2 with a byte-level BPE
// tokenizer.json, both rebuilt from real vocabularies) check out
// --format gguf as files llama.cpp loads and evaluates, that tokenize
// llamaText exactly as the vocabulary file does, with llama.cpp's tensor
// names and key/values, q/k permuted (llama) and 1-D tensors in F32
// (BF16 source; --dtype f16); rope scaling as the converter writes it
// (linear and yarn as key/values, llama3 as a rope_freqs tensor), and
// general.name from the ref (the model directory's name) as the
// converter's metadata heuristics make it.
func TestLlamaCppRunsHFConversions(t *testing.T) {
	vocabs := sharedTestdata(t, "gguf")
	tmp := t.TempDir()
	c := newCLI(t)
	cases := []struct {
		name, vocab, arch, dtype string
		bias, tied               bool
		args                     []string
		config                   string // more config.json
		kvs                      []string
		title                    string // general.name
	}{
		{"hf-llama", "ggml-vocab-llama-spm.gguf", "LlamaForCausalLM", "BF16", false, false, nil, "", nil, "Hf Llama"},
		{"hf-qwen2", "ggml-vocab-gpt-2.gguf", "Qwen2ForCausalLM", "F32", true, true, []string{"--dtype", "f16"}, "", nil, "Hf Qwen2"},
		{"Llama-3.1-tiny", "ggml-vocab-llama-spm.gguf", "LlamaForCausalLM", "BF16", false, false, nil,
			`"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}`, nil, "Llama 3.1 Tiny"},
		{"hf-mistral-linear", "ggml-vocab-llama-spm.gguf", "MistralForCausalLM", "BF16", false, false, nil,
			`"rope_scaling": {"type": "linear", "factor": 2.0}`, []string{"llama.rope.scaling.type", "llama.rope.scaling.factor"}, "Hf Mistral Linear"},
		{"hf-qwen2-yarn", "ggml-vocab-gpt-2.gguf", "Qwen2ForCausalLM", "F32", true, true, []string{"--dtype", "f16"},
			`"rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}`,
			[]string{"qwen2.rope.scaling.type", "qwen2.rope.scaling.factor", "qwen2.rope.scaling.original_context_length"}, "Hf Qwen2 Yarn"},
	}
	var models []llamaModel
	for _, tc := range cases {
		dir := filepath.Join(tmp, tc.name)
		var extra []string
		if tc.config != "" {
			extra = append(extra, tc.config)
		}
		hfModel(t, dir, filepath.Join(vocabs, tc.vocab), tc.arch, tc.dtype, tc.bias, tc.tied, extra...)
		c.add(dir, "--name", tc.name)
		out := filepath.Join(tmp, tc.name+"-gguf")
		r := c.run(append([]string{"checkout", tc.name, out, "--format", "gguf"}, tc.args...)...)
		if r.code != 0 || !strings.Contains(r.stderr, "left out, as llama.cpp's converter does") || !strings.Contains(r.stderr, "rotary_emb.inv_freq") {
			t.Fatalf("%s: the checkout does not say it left inv_freq out:\n%s", tc.name, r)
		}
		l, files := parseCheckedOut(t, out)
		kvs, err := gguf.DecodeKVs([]byte(l.Files[0].Meta[gguf.MetaKV]))
		if err != nil {
			t.Fatal(err)
		}
		arch := map[string]string{"LlamaForCausalLM": "llama", "MistralForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2"}[tc.arch]
		keys := map[string]bool{}
		for _, kv := range kvs {
			keys[kv.Key] = true
			if kv.Key == "general.name" && kv.Value.Strs[0] != tc.title {
				t.Errorf("%s: general.name %q, want %q", tc.name, kv.Value.Strs[0], tc.title)
			}
		}
		for _, k := range append([]string{"general.architecture", "general.name", "general.file_type", arch + ".block_count", arch + ".attention.head_count_kv",
			arch + ".embedding_length", "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.eos_token_id"}, tc.kvs...) {
			if !keys[k] {
				t.Errorf("%s: no %s in %v", tc.name, k, keysOfKVs(kvs))
			}
		}
		llama3 := strings.Contains(tc.config, "llama3")
		for i, tn := range l.Tensors {
			if tn.Name == gguf.RopeFreqsTensor && llama3 && i == 0 && tn.DType == "F32" && fmt.Sprint(tn.Shape) == "[4]" {
				continue // head_dim 8: 4 factors, first as the converter writes it
			}
			if !strings.HasPrefix(tn.Name, "blk.") && tn.Name != "token_embd.weight" && tn.Name != "output.weight" && tn.Name != "output_norm.weight" {
				t.Errorf("%s: tensor %s (%s %v, at %d) keeps an HF name or is not the converter's", tc.name, tn.Name, tn.DType, tn.Shape, i)
			}
			if len(tn.Shape) == 1 && tn.DType != "F32" {
				t.Errorf("%s: 1-D tensor %s is %s", tc.name, tn.Name, tn.DType)
			}
		}
		want := 12 // inv_freq left out; tied: no output.weight
		if tc.tied {
			want = 14
		}
		if llama3 {
			want++
		}
		if n := len(l.Tensors); n != want {
			t.Errorf("%s: %d tensors, want %d", tc.name, n, want)
		}
		if tc.name == "hf-llama" {
			checkHFToGGUFTensors(t, dir, l, files)
			// Dedup: new are the GGUF header's 5 frames (cut at its 3
			// large key/values: tokens, scores, token_type), q and k
			// (permuted), the 3 widened norms and the manifest; the rest
			// are the HF blobs.
			if res := c.add(out, "--name", tc.name+"-back"); res.NewBlobs != 11 {
				t.Errorf("adding the converted GGUF made %d new blobs, want 11", res.NewBlobs)
			}
		}
		models = append(models, llamaModel{path: filepath.Join(vocabs, tc.vocab), vocabOnly: true}, llamaModel{path: firstGGUF(t, out)})
	}
	out := llamaRun(t, 3, models...)
	logits := map[string]string{} // the first step's, by case
	for i := 0; i < len(out); i += 2 {
		vocab, conv := out[i], out[i+1]
		if len(vocab.Tokens) < 10 || !sameInts(conv.Tokens, vocab.Tokens) {
			t.Errorf("%s tokenizes %q as %v, its vocabulary %s as %v", conv.Path, llamaText, conv.Tokens, vocab.Path, vocab.Tokens)
		}
		t.Logf("%s: tokens %v (as its vocabulary), greedy %v", filepath.Base(filepath.Dir(conv.Path)), conv.Tokens, conv.Greedy)
		if len(conv.Greedy) != 3 || len(conv.Steps) == 0 {
			t.Errorf("%s: evaluation gave %v", conv.Path, conv.Greedy)
			continue
		}
		logits[cases[i/2].name] = conv.Steps[0].SHA256
	}
	// The same weights with rope scaling: llama.cpp reads the scaling
	// (rope_freqs, the key/values), so that its logits change.
	for scaled, plain := range map[string]string{"Llama-3.1-tiny": "hf-llama", "hf-mistral-linear": "hf-llama", "hf-qwen2-yarn": "hf-qwen2"} {
		if logits[scaled] == "" || logits[scaled] == logits[plain] {
			t.Errorf("%s: llama.cpp's logits are those of %s without rope scaling (%s)", scaled, plain, logits[plain])
		}
	}
}

package gguf

import (
	"github.com/mstore/mstore/internal/errs"
)

// FromGGUF converts one GGUF model of a llama-family architecture back to
// the HF layout: tensor names and the inverse permutation (Tensor), and
// config.json and the tokenizer files (Files).
type FromGGUF struct {
	Arch           string
	kv             kvMap
	heads, headsKV int
}

// NewFromGGUF reads a model's key/values. A model of another
// architecture gives nil and why (its tensors keep their GGUF names).
func NewFromGGUF(kvs []KV) (c *FromGGUF, why string, err error) {
	m := kvMap{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	arch, _ := m.str("general.architecture")
	if hfOfArch[arch] == "" {
		return nil, "general.architecture " + arch + " is not llama or qwen2", nil
	}
	c = &FromGGUF{Arch: arch, kv: m}
	// A model without what config.json and the tokenizer files need is
	// written as before.
	for _, k := range []string{"embedding_length", "feed_forward_length", "block_count", "attention.head_count", "context_length"} {
		if v, ok := m.u32(arch + "." + k); !ok || v == 0 {
			return nil, "the GGUF has no " + arch + "." + k, nil
		}
	}
	h, _ := m.u32(arch + ".attention.head_count")
	c.heads, c.headsKV = int(h), int(h)
	if kv, ok := m.u32(arch + ".attention.head_count_kv"); ok && kv > 0 {
		c.headsKV = int(kv)
	}
	switch model, _ := m.str("tokenizer.ggml.model"); {
	case len(m["tokenizer.ggml.tokens"].Strs) == 0:
		return nil, "the GGUF has no tokenizer.ggml.tokens", nil
	case model == "gpt2":
		if pre, _ := m.str("tokenizer.ggml.pre"); !hasPreJSON(pre) {
			return nil, "tokenizer.ggml.pre " + pre + " has no tokenizer.json pre_tokenizer in this build", nil
		}
	case model != "llama":
		return nil, "tokenizer.ggml.model " + model + " is not llama or gpt2", nil
	}
	return c, "", nil
}

// Tensor plans one GGUF tensor's HF name and (Heads > 0) Unpermute.
func (c *FromGGUF) Tensor(name string, shape []int64) (TensorPlan, error) {
	hf, ok := HFName(name)
	if !ok {
		return TensorPlan{}, errs.New(errs.SchemaError, "hfconv", "tensor %q is not one of a %s model's that transformers names; leave it out with --tensors", name, c.Arch)
	}
	p := TensorPlan{Name: hf}
	if h, ok := permutedHeads(c.Arch, name, c.heads, c.headsKV); ok {
		if len(shape) == 0 || shape[0]%int64(2*h) != 0 {
			return TensorPlan{}, errs.New(errs.SchemaError, "hfconv", "tensor %q of shape %v cannot be split into %d heads", name, shape, h)
		}
		p.Heads = h
	}
	return p, nil
}

// Files are config.json, tokenizer_config.json and tokenizer.model
// (SentencePiece) or tokenizer.json (BPE). tied says the model has no
// output.weight (transformers then ties lm_head to the embeddings);
// dtype is the tensors' torch_dtype ("float16", …, "" for none).
func (c *FromGGUF) Files(tied bool, dtype string) (map[string][]byte, error) {
	files, err := tokenizerFiles(c.kv)
	if err != nil {
		return nil, err
	}
	cfg, err := c.config(tied, dtype)
	if err != nil {
		return nil, err
	}
	files[ConfigFile] = cfg
	return files, nil
}

func (c *FromGGUF) config(tied bool, dtype string) ([]byte, error) {
	m, p := c.kv, c.Arch+"."
	o := &orderedJSON{}
	o.set("architectures", []string{hfOfArch[c.Arch]})
	o.set("model_type", c.Arch)
	for _, k := range [][2]string{
		{"hidden_size", "embedding_length"}, {"intermediate_size", "feed_forward_length"},
		{"num_hidden_layers", "block_count"}, {"num_attention_heads", "attention.head_count"},
		{"num_key_value_heads", "attention.head_count_kv"}, {"max_position_embeddings", "context_length"},
	} {
		v, ok := m.u32(p + k[1])
		if !ok {
			return nil, errs.New(errs.SchemaError, "hfconv", "the GGUF has no %s, which config.json needs as %s", p+k[1], k[0])
		}
		o.set(k[0], v)
	}
	if v, ok := m.f(p + "attention.layer_norm_rms_epsilon"); ok {
		o.set("rms_norm_eps", float32JSON(v))
	}
	if v, ok := m.f(p + "rope.freq_base"); ok {
		o.set("rope_theta", float32JSON(v))
	}
	hidden, _ := m.u32(p + "embedding_length")
	if d, ok := m.u32(p + "attention.key_length"); ok && c.heads > 0 && d != hidden/uint64(c.heads) {
		o.set("head_dim", d)
	} else if d, ok := m.u32(p + "rope.dimension_count"); ok && c.heads > 0 && d != hidden/uint64(c.heads) {
		o.set("head_dim", d)
	}
	if t, ok := m.str(p + "rope.scaling.type"); ok && t != "none" {
		rs := &orderedJSON{}
		rs.set("rope_type", t)
		if f, ok := m.f(p + "rope.scaling.factor"); ok {
			rs.set("factor", float32JSON(f))
		}
		if n, ok := m.u32(p + "rope.scaling.original_context_length"); ok {
			rs.set("original_max_position_embeddings", n)
		}
		o.set("rope_scaling", rs)
	}
	vocab, ok := m.u32(p + "vocab_size")
	if !ok {
		vocab = uint64(len(m["tokenizer.ggml.tokens"].Strs))
	}
	o.set("vocab_size", vocab)
	for _, k := range []string{"bos", "eos", "pad"} {
		key := map[string]string{"bos": "bos", "eos": "eos", "pad": "padding"}[k]
		if id, ok := m.u32("tokenizer.ggml." + key + "_token_id"); ok {
			o.set(k+"_token_id", id)
		}
	}
	o.set("hidden_act", "silu")
	o.set("tie_word_embeddings", tied)
	if dtype != "" {
		o.set("torch_dtype", dtype)
	}
	return indentJSON(o)
}

// TorchDType is config.json's torch_dtype for a SafeTensors dtype.
func TorchDType(dtype string) string {
	return map[string]string{"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[dtype]
}

// TokenizerFiles rebuilds the HF tokenizer files from tokenizer.ggml.*
// key/values: tokenizer.model for tokenizer.ggml.model "llama"
// (SentencePiece), tokenizer.json for "gpt2" (byte-level BPE), and
// tokenizer_config.json with the special tokens, add_bos_token /
// add_eos_token and the chat template.
func TokenizerFiles(kvs []KV) (map[string][]byte, error) {
	m := kvMap{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return tokenizerFiles(m)
}

func tokenizerFiles(m kvMap) (map[string][]byte, error) {
	model, _ := m.str("tokenizer.ggml.model")
	tokens := m["tokenizer.ggml.tokens"].Strs
	if len(tokens) == 0 {
		return nil, errs.New(errs.SchemaError, "hfconv", "the GGUF has no tokenizer.ggml.tokens to rebuild a tokenizer from")
	}
	types := make([]int32, len(tokens))
	if tt, ok := m["tokenizer.ggml.token_type"]; ok && tt.Len() == len(tokens) {
		for i := range types {
			types[i] = int32(tt.Int(i))
		}
	} else {
		for i := range types {
			types[i] = typeNormal
		}
	}
	id := func(k string) int {
		if v, ok := m.u32("tokenizer.ggml." + k + "_token_id"); ok && v < uint64(len(tokens)) {
			return int(v)
		}
		return -1
	}
	files := map[string][]byte{}
	switch model {
	case "llama":
		sc := m["tokenizer.ggml.scores"]
		pieces := make([]piece, len(tokens))
		for i, t := range tokens {
			pieces[i] = piece{text: t, typ: types[i]}
			if sc.Len() == len(tokens) {
				pieces[i].score = float32(sc.Float(i))
			}
		}
		files[TokenizerModelFile] = writeSPM(pieces, id("unknown"), id("bos"), id("eos"))
		addBOS := true // LlamaTokenizer's default
		if v, ok := m["tokenizer.ggml.add_bos_token"]; ok && v.Type == TypeBool && !v.Array {
			addBOS = v.Uint(0) != 0
		}
		b, err := spmTokenizerJSON(pieces, id("unknown"), id("bos"), addBOS)
		if err != nil {
			return nil, err
		}
		files[TokenizerJSONFile] = b
	case "gpt2":
		pre, _ := m.str("tokenizer.ggml.pre")
		b, err := bpeTokenizerJSON(tokens, types, m["tokenizer.ggml.merges"].Strs, pre)
		if err != nil {
			return nil, err
		}
		files[TokenizerJSONFile] = b
	default:
		return nil, errs.New(errs.UnsupportedVersion, "hfconv", "tokenizer.ggml.model %q is not llama (SentencePiece) or gpt2 (BPE), the ones this build rebuilds", model)
	}
	tc := &orderedJSON{}
	for _, k := range []string{"bos", "eos"} {
		if v, ok := m["tokenizer.ggml.add_"+k+"_token"]; ok && v.Type == TypeBool && !v.Array {
			tc.set("add_"+k+"_token", v.Uint(0) != 0)
		}
	}
	for _, st := range specialTypes {
		if i := id(st.key); i >= 0 {
			tc.set(st.typ+"_token", tokens[i])
		}
	}
	if t, ok := m.str("tokenizer.chat_template"); ok {
		tc.set("chat_template", t)
	}
	if model == "llama" {
		tc.set("tokenizer_class", "LlamaTokenizer")
	} else {
		tc.set("tokenizer_class", "PreTrainedTokenizerFast")
	}
	b, err := indentJSON(tc)
	if err != nil {
		return nil, err
	}
	files[TokenizerConfigFile] = b
	return files, nil
}

// bpeTokenizerJSON writes a tokenizers tokenizer.json for a byte-level BPE
// vocabulary: CONTROL and USER_DEFINED tokens as added_tokens, UNUSED ones
// (the converter's [PAD<id>]) left out so that they come back as such.
func bpeTokenizerJSON(tokens []string, types []int32, merges []string, pre string) ([]byte, error) {
	preTok, ok := preJSON(pre)
	if !ok {
		return nil, errs.New(errs.UnsupportedVersion, "hfconv", "tokenizer.ggml.pre %q has no tokenizer.json pre_tokenizer this build writes (%s)", pre, preNames())
	}
	vocab := &orderedJSON{}
	var added []any
	for i, t := range tokens {
		if types[i] == typeUnused {
			continue
		}
		vocab.set(t, i)
		if types[i] == typeControl || types[i] == typeUserDefined {
			a := &orderedJSON{}
			a.set("id", i)
			a.set("content", t)
			a.set("single_word", false)
			a.set("lstrip", false)
			a.set("rstrip", false)
			a.set("normalized", types[i] == typeUserDefined)
			a.set("special", types[i] == typeControl)
			added = append(added, a)
		}
	}
	if merges == nil {
		merges = []string{}
	}
	model := &orderedJSON{}
	model.set("type", "BPE")
	model.set("dropout", nil)
	model.set("unk_token", nil)
	model.set("continuing_subword_prefix", "")
	model.set("end_of_word_suffix", "")
	model.set("fuse_unk", false)
	model.set("byte_fallback", false)
	model.set("ignore_merges", false)
	model.set("vocab", vocab)
	model.set("merges", merges)
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	t := &orderedJSON{}
	t.set("version", "1.0")
	t.set("truncation", nil)
	t.set("padding", nil)
	if added == nil {
		added = []any{}
	}
	t.set("added_tokens", added)
	t.set("normalizer", nil)
	t.set("pre_tokenizer", preTok)
	t.set("post_processor", byteLevel)
	t.set("decoder", byteLevel)
	t.set("model", model)
	return indentJSON(t)
}

func hasPreJSON(pre string) bool {
	_, ok := preJSON(pre)
	return ok
}

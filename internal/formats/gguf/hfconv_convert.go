package gguf

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strings"

	"github.com/mstore/mstore/internal/errs"
)

// Files are the HF files of a model directory; nil means absent.
type Files struct {
	Config, TokenizerJSON, TokenizerModel, TokenizerConfig []byte
}

// The file names Files come from.
const (
	ConfigFile          = "config.json"
	TokenizerJSONFile   = "tokenizer.json"
	TokenizerModelFile  = "tokenizer.model"
	TokenizerConfigFile = "tokenizer_config.json"
)

// ToGGUF converts one HF model: made by NewToGGUF, asked about each tensor
// (Tensor), then for the key/values (KVs).
type ToGGUF struct {
	Arch  string
	name  string
	hp    hparams
	hkvs  []KV // hyper-parameters
	tkvs  []KV // tokenizer
	vocab int
	// ropeFreqs are rope_freqs.weight's values (llama3 rope scaling).
	ropeFreqs []float32
}

// NewToGGUF reads the files of an HF model directory. A directory this
// package does not convert (no config.json, another architecture, no
// tokenizer) gives nil and why, so that the caller can write the tensors
// as they are; malformed files of one it converts are errors. name is
// general.name.
func NewToGGUF(f Files, name string) (c *ToGGUF, why string, err error) {
	if f.Config == nil {
		return nil, "there is no config.json", nil
	}
	cfg, err := parseConfig(f.Config)
	if err != nil {
		return nil, "", err
	}
	arch := ""
	for _, a := range cfg.Architectures {
		if arch = archOf[a]; arch != "" {
			break
		}
	}
	if arch == "" {
		return nil, "config.json architectures " + strings.Join(cfg.Architectures, ", ") + " is not LlamaForCausalLM, MistralForCausalLM or Qwen2ForCausalLM", nil
	}
	if f.TokenizerModel == nil && f.TokenizerJSON == nil {
		return nil, "there is no tokenizer.json or tokenizer.model", nil
	}
	c = &ToGGUF{Arch: arch, name: name}
	if c.hkvs, c.hp, err = hparamKVs(arch, cfg); err != nil {
		var missing missingError
		if errors.As(err, &missing) {
			return nil, missing.Error(), nil
		}
		return nil, "", err
	}
	c.ropeFreqs = c.hp.ropeFreqs
	tc := map[string]json.RawMessage{}
	if f.TokenizerConfig != nil {
		if err := json.Unmarshal(f.TokenizerConfig, &tc); err != nil {
			return nil, "", errs.Wrap(errs.SchemaError, "hfconv", err, "tokenizer_config.json does not parse")
		}
	}
	var tj *tokenizerJSON
	if f.TokenizerJSON != nil {
		if tj, err = parseTokenizerJSON(f.TokenizerJSON); err != nil {
			return nil, "", err
		}
	}
	// As the converter: llama and mistral take tokenizer.model when there
	// is one, qwen2 too (Qwen2Model.set_vocab tries SentencePiece first).
	var tokens []string
	if f.TokenizerModel != nil {
		tokens, c.tkvs, err = spmKVs(f.TokenizerModel, c.hp, tc)
	} else {
		tokens, c.tkvs, err = bpeKVs(tj, c.hp)
	}
	if err != nil {
		return nil, "", err
	}
	c.vocab = len(tokens)
	var added []addedToken
	if tj != nil {
		added = tj.AddedTokens
	}
	sp, err := specialKVs(tc, added, tokens, cfg)
	if err != nil {
		return nil, "", err
	}
	c.tkvs = append(c.tkvs, sp...)
	return c, "", nil
}

func spmKVs(model []byte, hp hparams, tc map[string]json.RawMessage) ([]string, []KV, error) {
	pieces, err := parseSPM(model)
	if err != nil {
		return nil, nil, err
	}
	n := len(pieces)
	if hp.hasVocab {
		n = int(hp.vocab)
	}
	tokens, scores, types := make([]string, n), make([]uint64, n), make([]uint64, n)
	for i := range n {
		tokens[i], scores[i], types[i] = padToken(i), uint64(math.Float32bits(-10000)), typeUnused
		if i < len(pieces) {
			p := pieces[i]
			t := p.typ
			if t == typeUserDefined { // the converter reads only unknown, control, unused, byte
				t = typeNormal
			}
			tokens[i], scores[i], types[i] = p.text, uint64(math.Float32bits(p.score)), uint64(uint32(t))
		}
	}
	// tokenizer_config.json added_tokens_decoder overrides, as in
	// _create_vocab_sentencepiece.
	if raw, ok := tc["added_tokens_decoder"]; ok {
		var dec map[string]struct {
			Content string `json:"content"`
			Special bool   `json:"special"`
		}
		if err := json.Unmarshal(raw, &dec); err != nil {
			return nil, nil, errs.Wrap(errs.SchemaError, "hfconv", err, "tokenizer_config.json added_tokens_decoder")
		}
		for k, d := range dec {
			id, err := atoi(k)
			if err != nil || id >= n {
				continue
			}
			if d.Special || looksSpecial(d.Content) {
				tokens[id], types[id] = d.Content, typeControl
			} else {
				tokens[id], types[id] = strings.ReplaceAll(d.Content, "▁", " "), typeUserDefined
			}
			scores[id] = uint64(math.Float32bits(-1000))
		}
	}
	kvs := []KV{
		{Key: "tokenizer.ggml.model", Value: StringValue("llama")},
		{Key: "tokenizer.ggml.pre", Value: StringValue("default")},
		{Key: "tokenizer.ggml.tokens", Value: StringArray(tokens)},
		{Key: "tokenizer.ggml.scores", Value: ArrayValue(TypeFloat32, scores)},
		{Key: "tokenizer.ggml.token_type", Value: ArrayValue(TypeInt32, types)},
	}
	return tokens, kvs, nil
}

func bpeKVs(tj *tokenizerJSON, hp hparams) ([]string, []KV, error) {
	if tj.Model.Type != "BPE" {
		return nil, nil, errs.New(errs.UnsupportedVersion, "hfconv", "tokenizer.json model is %q, not a byte-level BPE; this build converts BPE tokenizer.json and SentencePiece tokenizer.model", tj.Model.Type)
	}
	if tj.Model.ByteFallback {
		return nil, nil, errs.New(errs.UnsupportedVersion, "hfconv", "tokenizer.json is a SentencePiece-style BPE (byte_fallback) without its tokenizer.model; add tokenizer.model to the version")
	}
	pre, err := detectPre(tj.PreTok)
	if err != nil {
		return nil, nil, err
	}
	tokens, types, err := bpeVocab(tj, int(hp.vocab), hp.hasVocab)
	if err != nil {
		return nil, nil, err
	}
	merges, err := tj.merges()
	if err != nil {
		return nil, nil, err
	}
	tt := make([]uint64, len(types))
	for i, t := range types {
		tt[i] = uint64(uint32(t))
	}
	kvs := []KV{
		{Key: "tokenizer.ggml.model", Value: StringValue("gpt2")},
		{Key: "tokenizer.ggml.pre", Value: StringValue(pre)},
		{Key: "tokenizer.ggml.tokens", Value: StringArray(tokens)},
		{Key: "tokenizer.ggml.token_type", Value: ArrayValue(TypeInt32, tt)},
	}
	if len(merges) > 0 {
		kvs = append(kvs, KV{Key: "tokenizer.ggml.merges", Value: StringArray(merges)})
	}
	return tokens, kvs, nil
}

func atoi(s string) (int, error) {
	n := 0
	if s == "" || len(s) > 9 {
		return 0, errs.New(errs.SchemaError, "hfconv", "%q is not a token id", s)
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, errs.New(errs.SchemaError, "hfconv", "%q is not a token id", s)
		}
		n = n*10 + int(r-'0')
	}
	return n, nil
}

// TensorPlan says how one HF tensor is written to GGUF.
type TensorPlan struct {
	Skip bool   // left out (rotary inv_freq), as the converter does
	Name string // the GGUF name
	// Heads, when > 0, is the head count Permute takes the rows with.
	Heads int
	// F32: a 1-D tensor (norm weight, bias), which ggml's kernels take
	// only in F32, whatever the other tensors' dtype.
	F32 bool
}

// Tensor plans the HF tensor name of the given shape.
func (c *ToGGUF) Tensor(name string, shape []int64) (TensorPlan, error) {
	g, skip, ok := GGUFName(name)
	if skip {
		return TensorPlan{Skip: true}, nil
	}
	if !ok {
		return TensorPlan{}, errs.New(errs.SchemaError, "hfconv", "tensor %q is not one of a %s model's (llama.cpp would not load it); leave it out with --tensors", name, c.Arch)
	}
	p := TensorPlan{Name: g, F32: len(shape) <= 1}
	if h, ok := permutedHeads(c.Arch, g, int(c.hp.heads), int(c.hp.headsKV)); ok {
		if len(shape) == 0 || shape[0]%int64(2*h) != 0 {
			return TensorPlan{}, errs.New(errs.SchemaError, "hfconv", "tensor %q of shape %v cannot be split into %d heads (config.json num_attention_heads / num_key_value_heads)", name, shape, h)
		}
		p.Heads = h
	}
	if g == "token_embd.weight" && len(shape) == 2 && int(shape[0]) != c.vocab {
		return TensorPlan{}, errs.New(errs.SchemaError, "hfconv", "%s has %d rows, the tokenizer %d tokens (config.json vocab_size)", name, shape[0], c.vocab)
	}
	return p, nil
}

// FileType is general.file_type (llama_ftype) of a model whose 2-D and
// larger tensors have dtype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_BF16 32.
func FileType(dtype string) (uint32, bool) {
	ft, ok := map[string]uint32{"F32": 0, "F16": 1, "BF16": 32}[dtype]
	return ft, ok
}

// KVs are the GGUF key/values, in convert_hf_to_gguf.py's order;
// general.file_type is written when fileType >= 0.
func (c *ToGGUF) KVs(fileType int64) []KV {
	kvs := []KV{
		{Key: "general.architecture", Value: StringValue(c.Arch)},
		{Key: "general.name", Value: StringValue(c.name)},
	}
	kvs = append(kvs, c.hkvs...)
	if fileType >= 0 {
		kvs = append(kvs, KV{Key: KeyFileType, Value: Uint32Value(uint32(fileType))})
	}
	return append(kvs, c.tkvs...)
}

// ToF32 converts a little-endian F16, BF16 or F32 tensor to F32, exactly.
func ToF32(dtype string, src []byte) ([]byte, error) {
	switch dtype {
	case "F32":
		return src, nil
	case "F16", "BF16":
	default:
		return nil, errs.New(errs.LossyConversion, "hfconv", "a %s tensor is not converted to F32 exactly", dtype)
	}
	if len(src)%2 != 0 {
		return nil, errs.New(errs.IntegrityError, "hfconv", "%d bytes are not %s values", len(src), dtype)
	}
	out := make([]byte, len(src)*2)
	for i := 0; i < len(src)/2; i++ {
		h := binary.LittleEndian.Uint16(src[2*i:])
		var f uint32
		if dtype == "BF16" {
			f = uint32(h) << 16
		} else {
			f = f16ToF32(h)
		}
		binary.LittleEndian.PutUint32(out[4*i:], f)
	}
	return out, nil
}

func f16ToF32(h uint16) uint32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf, NaN
		return sign | 0x7f800000 | mant<<13
	case exp != 0:
		return sign | (exp+112)<<23 | mant<<13
	case mant == 0:
		return sign
	}
	// subnormal: normalize
	e := uint32(113)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return sign | e<<23 | (mant&0x3ff)<<13
}

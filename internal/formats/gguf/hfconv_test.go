package gguf

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/testenv"
)

// vocabKVs reads the key/values of a real GGUF file of the shared testdata.
func vocabKVs(t *testing.T, name string) []KV {
	t.Helper()
	dir := formattest.SharedTestdata("gguf")
	if dir == "" {
		testenv.Missing(t, "no ../shared/testdata/gguf")
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		testenv.Missing(t, "%v", err)
	}
	l, err := Codec.Parse(formattest.NewMemDir(map[string][]byte{name: b}), []string{name})
	if err != nil {
		t.Fatal(err)
	}
	kvs, err := DecodeKVs([]byte(l.Files[0].Meta[MetaKV]))
	if err != nil {
		t.Fatal(err)
	}
	return kvs
}

func tokenizerOnly(kvs []KV) []KV {
	var out []KV
	for _, kv := range kvs {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			out = append(out, kv)
		}
	}
	return out
}

func kvMapOf(kvs []KV) kvMap {
	m := kvMap{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

const tinyConfig = `{"architectures": ["%s"], "hidden_size": 8, "intermediate_size": 32, "num_hidden_layers": 1,
 "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 128, "rms_norm_eps": 1e-05,
 "rope_theta": 10000.0, "vocab_size": %d}`

// TestTokenizerRoundTripRealVocabularies: the tokenizer files rebuilt from
// a real vocabulary GGUF (SentencePiece llama-spm, byte-level BPE gpt-2)
// convert back to exactly the vocabulary's tokenizer key/values, in the
// converter's order.
func TestTokenizerRoundTripRealVocabularies(t *testing.T) {
	for _, tc := range []struct{ file, arch string }{
		{"ggml-vocab-llama-spm.gguf", "LlamaForCausalLM"},
		{"ggml-vocab-gpt-2.gguf", "Qwen2ForCausalLM"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			kvs := vocabKVs(t, tc.file)
			files, err := TokenizerFiles(kvs)
			if err != nil {
				t.Fatal(err)
			}
			n := len(kvMapOf(kvs)["tokenizer.ggml.tokens"].Strs)
			c, why, err := NewToGGUF(Files{
				Config: fmtConfig(tc.arch, n), TokenizerJSON: files[TokenizerJSONFile],
				TokenizerModel: files[TokenizerModelFile], TokenizerConfig: files[TokenizerConfigFile],
			}, "x")
			if err != nil || c == nil {
				t.Fatalf("NewToGGUF: %v %s", err, why)
			}
			got, want := tokenizerOnly(c.KVs(-1)), tokenizerOnly(kvs)
			if !bytes.Equal(EncodeKVs(got), EncodeKVs(want)) {
				for i := range max(len(got), len(want)) {
					if i >= len(got) || i >= len(want) || got[i].Key != want[i].Key || !got[i].Value.Equal(want[i].Value) {
						t.Fatalf("tokenizer key/values differ at %d: got %d keys, want %d (%v)", i, len(got), len(want), keysOf(got))
					}
				}
			}
		})
	}
}

func keysOf(kvs []KV) []string {
	var k []string
	for _, kv := range kvs {
		k = append(k, kv.Key)
	}
	return k
}

func fmtConfig(arch string, vocab int) []byte {
	return []byte(strings.Replace(strings.Replace(tinyConfig, "%s", arch, 1), "%d", itoa(vocab), 1))
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestHParams: config.json's numbers land under the converter's keys and
// types, llama's vocab_size and rope.dimension_count included, and come
// back into config.json.
func TestHParams(t *testing.T) {
	cfg, err := parseConfig(fmtConfig("LlamaForCausalLM", 40))
	if err != nil {
		t.Fatal(err)
	}
	kvs, hp, err := hparamKVs("llama", cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []KV{
		{Key: "llama.block_count", Value: Uint32Value(1)},
		{Key: "llama.context_length", Value: Uint32Value(128)},
		{Key: "llama.embedding_length", Value: Uint32Value(8)},
		{Key: "llama.feed_forward_length", Value: Uint32Value(32)},
		{Key: "llama.attention.head_count", Value: Uint32Value(2)},
		{Key: "llama.attention.head_count_kv", Value: Uint32Value(1)},
		{Key: "llama.rope.freq_base", Value: Float32Value(10000)},
		{Key: "llama.attention.layer_norm_rms_epsilon", Value: Float32Value(1e-5)},
		{Key: "llama.vocab_size", Value: Uint32Value(40)},
		{Key: "llama.rope.dimension_count", Value: Uint32Value(4)},
	}
	if !bytes.Equal(EncodeKVs(kvs), EncodeKVs(want)) {
		t.Fatalf("got %s", EncodeKVs(kvs))
	}
	if hp.heads != 2 || hp.headsKV != 1 {
		t.Fatalf("heads %d/%d", hp.heads, hp.headsKV)
	}
	back := &FromGGUF{Arch: "llama", kv: kvMapOf(kvs), heads: 2, headsKV: 1}
	b, err := back.config(true, "float16")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"hidden_size": 8.0, "num_key_value_heads": 1.0, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
		"vocab_size": 40.0, "tie_word_embeddings": true, "torch_dtype": "float16", "architectures": []any{"LlamaForCausalLM"}} {
		if g, _ := json.Marshal(got[k]); string(g) != mustJSON(v) {
			t.Errorf("config.json %s = %s, want %s", k, g, mustJSON(v))
		}
	}
	cfg.Fields["head_dim"] = json.RawMessage("6")
	kvs, _, _ = hparamKVs("llama", cfg)
	m := kvMapOf(kvs)
	if k, _ := m.u32("llama.attention.key_length"); k != 6 {
		t.Fatalf("head_dim: %s", EncodeKVs(kvs))
	}
	if d, _ := m.u32("llama.rope.dimension_count"); d != 6 {
		t.Fatalf("head_dim: rope.dimension_count %d", d)
	}
	if b, _ := (&FromGGUF{Arch: "llama", kv: m, heads: 2, headsKV: 1}).config(false, ""); !bytes.Contains(b, []byte(`"head_dim": 6`)) {
		t.Fatalf("head_dim back: %s", b)
	}
	delete(cfg.Fields, "head_dim")
	huge, _ := parseConfig(fmtConfig("LlamaForCausalLM", 1<<30))
	if _, _, err := hparamKVs("llama", huge); errs.ClassOf(err) != errs.SizeLimitExceeded {
		t.Fatalf("vocab_size 2^30: %v", err)
	}
	// rope_scaling llama3 gives a rope_freqs tensor, no key/value.
	plain, _, _ := hparamKVs("llama", cfg)
	cfg.Fields["rope_scaling"] = json.RawMessage(`{"rope_type": "llama3", "factor": 8.0}`)
	if kvs2, hp, err := hparamKVs("llama", cfg); err != nil || len(hp.ropeFreqs) == 0 || len(kvs2) != len(plain) {
		t.Fatalf("llama3 rope scaling: %v, %d factors", err, len(hp.ropeFreqs))
	}
	cfg.Fields["rope_scaling"] = json.RawMessage(`{"type": "linear", "factor": 4.0}`)
	kvs, _, err = hparamKVs("llama", cfg)
	if err != nil || kvs[len(kvs)-2].Key != "llama.rope.scaling.type" || kvs[len(kvs)-1].Value.Float(0) != 4 {
		t.Fatalf("linear rope scaling: %v %s", err, EncodeKVs(kvs))
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestNames: every mapped name goes both ways; inv_freq is skipped;
// others are refused.
func TestNames(t *testing.T) {
	for _, l := range layerNames {
		hf := "model.layers.17." + l[0]
		g, skip, ok := GGUFName(hf)
		if !ok || skip || g != "blk.17."+l[1] {
			t.Fatalf("%s → %s %v %v", hf, g, skip, ok)
		}
		if back, ok := HFName(g); !ok || back != hf {
			t.Fatalf("%s → %s", g, back)
		}
	}
	for _, n := range [][2]string{{"lm_head.weight", "output.weight"}, {"model.embed_tokens.weight", "token_embd.weight"}, {"model.norm.weight", "output_norm.weight"}} {
		if g, _, _ := GGUFName(n[0]); g != n[1] {
			t.Fatalf("%s → %s", n[0], g)
		}
	}
	if _, skip, _ := GGUFName("model.layers.0.self_attn.rotary_emb.inv_freq"); !skip {
		t.Fatal("inv_freq not skipped")
	}
	c := &ToGGUF{Arch: "llama", hp: hparams{heads: 2, headsKV: 1}, vocab: 4}
	if _, err := c.Tensor("model.vision.weight", []int64{2}); errs.ClassOf(err) != errs.SchemaError {
		t.Fatalf("unknown tensor: %v", err)
	}
	p, err := c.Tensor("model.layers.0.self_attn.k_proj.weight", []int64{4, 8})
	if err != nil || p.Heads != 1 || p.F32 {
		t.Fatalf("k_proj: %+v %v", p, err)
	}
	if p, _ := c.Tensor("model.layers.0.input_layernorm.weight", []int64{8}); !p.F32 || p.Heads != 0 {
		t.Fatalf("norm: %+v", p)
	}
	if _, err := c.Tensor("model.layers.0.self_attn.q_proj.weight", []int64{6, 8}); errs.ClassOf(err) != errs.SchemaError {
		t.Fatalf("6 rows into 2 heads: %v", err)
	}
	q := &ToGGUF{Arch: "qwen2", hp: hparams{heads: 2, headsKV: 1}}
	if p, _ := q.Tensor("model.layers.0.self_attn.q_proj.weight", []int64{8, 8}); p.Heads != 0 {
		t.Fatal("qwen2 q_proj permuted")
	}
}

// TestPermuteSmall: one head of 4 rows (2 halves of 2) interleaves as
// rows 0 2 1 3; Unpermute undoes it.
func TestPermuteSmall(t *testing.T) {
	src := []byte{0, 0, 1, 1, 2, 2, 3, 3}
	got, err := Permute(src, 4, 1)
	if err != nil || !bytes.Equal(got, []byte{0, 0, 2, 2, 1, 1, 3, 3}) {
		t.Fatalf("%v %v", got, err)
	}
	back, _ := Unpermute(got, 4, 1)
	if !bytes.Equal(back, src) {
		t.Fatal(back)
	}
	if _, err := Permute(src, 4, 3); errs.ClassOf(err) != errs.SchemaError {
		t.Fatalf("4 rows in 3 heads: %v", err)
	}
}

// TestPermuteMatchesConverter: Permute equals convert_hf_to_gguf.py's
// numpy expression, run by python3-numpy, and Unpermute inverts it.
func TestPermuteMatchesConverter(t *testing.T) {
	py := "/usr/bin/python3"
	if exec.Command(py, "-c", "import numpy").Run() != nil {
		testenv.Missing(t, "%s with numpy is missing", py)
	}
	const rows, cols, heads = 24, 5, 3
	src := make([]byte, rows*cols*4)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range rows * cols {
		binary.LittleEndian.PutUint32(src[4*i:], math.Float32bits(r.Float32()))
	}
	script := `import sys, numpy as np
w = np.frombuffer(sys.stdin.buffer.read(), dtype="<f4").reshape(24, 5)
n_head = 3
out = w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
sys.stdout.buffer.write(np.ascontiguousarray(out).tobytes())`
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = bytes.NewReader(src)
	want, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Permute(src, rows, heads)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Permute differs from the converter's numpy: %v", err)
	}
	back, _ := Unpermute(got, rows, heads)
	if !bytes.Equal(back, src) {
		t.Fatal("Unpermute does not invert Permute")
	}
}

// TestToF32: F16 (normal, subnormal, inf, nan) and BF16 widen exactly.
func TestToF32(t *testing.T) {
	for _, c := range []struct {
		h    uint16
		want float32
	}{{0x3c00, 1}, {0xc000, -2}, {0x0001, 0x1p-24}, {0x03ff, 0x3ffp-24}, {0x7bff, 65504}, {0x8000, float32(math.Copysign(0, -1))}} {
		b, _ := ToF32("F16", binary.LittleEndian.AppendUint16(nil, c.h))
		if got := math.Float32frombits(binary.LittleEndian.Uint32(b)); math.Float32bits(got) != math.Float32bits(c.want) {
			t.Errorf("f16 %#04x → %g, want %g", c.h, got, c.want)
		}
	}
	b, _ := ToF32("F16", binary.LittleEndian.AppendUint16(nil, 0x7c00))
	if !math.IsInf(float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), 1) {
		t.Error("f16 inf")
	}
	b, _ = ToF32("BF16", binary.LittleEndian.AppendUint16(nil, 0x3fc0))
	if math.Float32frombits(binary.LittleEndian.Uint32(b)) != 1.5 {
		t.Error("bf16 1.5")
	}
	if _, err := ToF32("F64", make([]byte, 8)); errs.ClassOf(err) != errs.LossyConversion {
		t.Errorf("F64: %v", err)
	}
}

// TestPreDetection: the pre-tokenizers of gpt-2, llama 3 and qwen2 as
// their tokenizer.json declare them are recognized; another is refused.
func TestPreDetection(t *testing.T) {
	for _, k := range knownPre {
		raw, _ := json.Marshal(must(preJSON(k.name)))
		if got, err := detectPre(raw); err != nil || got != k.name {
			t.Errorf("%s: got %q %v", k.name, got, err)
		}
	}
	// Qwen2's own tokenizer.json spelling.
	qwen := `{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false}]}`
	if got, err := detectPre(json.RawMessage(qwen)); err != nil || got != "qwen2" {
		t.Errorf("qwen2 tokenizer.json: %q %v", got, err)
	}
	for _, bad := range []string{`null`, `{"type":"Whitespace"}`, `{"type":"ByteLevel","add_prefix_space":true}`} {
		if _, err := detectPre(json.RawMessage(bad)); errs.ClassOf(err) != errs.UnsupportedVersion {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func must(v any, ok bool) any {
	if !ok {
		panic("missing")
	}
	return v
}

// TestNotConverted: no config.json, another architecture or no
// tokenizer give a reason, not an error.
func TestNotConverted(t *testing.T) {
	for _, f := range []Files{
		{},
		{Config: []byte(`{"architectures": ["BertModel"]}`), TokenizerJSON: []byte(`{}`)},
		{Config: fmtConfig("LlamaForCausalLM", 4)},
		{Config: []byte(`{"architectures": ["LlamaForCausalLM"], "hidden_size": 8}`), TokenizerJSON: []byte(`{}`)},
	} {
		if c, why, err := NewToGGUF(f, "x"); c != nil || why == "" || err != nil {
			t.Errorf("%s: %v %q %v", f.Config, c, why, err)
		}
	}
	if _, _, err := NewToGGUF(Files{Config: []byte(`{`), TokenizerJSON: []byte(`{}`)}, "x"); errs.ClassOf(err) != errs.SchemaError {
		t.Errorf("bad config.json: %v", err)
	}
	if _, err := parseSPM([]byte{0x0a, 0x05, 1}); errs.ClassOf(err) != errs.SchemaError {
		t.Errorf("truncated tokenizer.model: %v", err)
	}
}

// TestFromGGUFNotConverted: a GGUF without the hyper-parameters or the
// tokenizer an HF directory needs keeps its GGUF names (nil, why).
func TestFromGGUFNotConverted(t *testing.T) {
	base := []KV{
		{Key: "general.architecture", Value: StringValue("llama")},
		{Key: "llama.embedding_length", Value: Uint32Value(8)},
		{Key: "llama.feed_forward_length", Value: Uint32Value(8)},
		{Key: "llama.block_count", Value: Uint32Value(1)},
		{Key: "llama.attention.head_count", Value: Uint32Value(2)},
		{Key: "llama.context_length", Value: Uint32Value(8)},
	}
	tok := []KV{{Key: "tokenizer.ggml.model", Value: StringValue("llama")}, {Key: "tokenizer.ggml.tokens", Value: StringArray([]string{"a"})}}
	if c, why, err := NewFromGGUF(append(append([]KV{}, base...), tok...)); c == nil || err != nil {
		t.Fatalf("complete model: %v %s", err, why)
	}
	for i, kvs := range [][]KV{base, append(append([]KV{}, base[:4]...), tok...), {{Key: "general.architecture", Value: StringValue("bert")}}} {
		if c, why, err := NewFromGGUF(kvs); c != nil || why == "" || err != nil {
			t.Errorf("case %d: %v %q %v", i, c, why, err)
		}
	}
}

// TestArchitectures: mistral converts as llama (permuted), qwen2 is not
// permuted and converts back to Qwen2ForCausalLM with its biases named.
func TestArchitectures(t *testing.T) {
	files := Files{Config: fmtConfig("MistralForCausalLM", 4), TokenizerJSON: []byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "<|x|>": 3}, "merges": ["a b"]},
 "added_tokens": [{"id": 3, "content": "<|x|>", "special": false}],
 "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}}`)}
	c, why, err := NewToGGUF(files, "m")
	if err != nil || c == nil || c.Arch != "llama" {
		t.Fatalf("mistral: %v %q %v", c, why, err)
	}
	kv := kvMapOf(c.KVs(1))
	if pre, _ := kv.str("tokenizer.ggml.pre"); pre != "gpt-2" || kv["tokenizer.ggml.merges"].Strs[0] != "a b" || kv["tokenizer.ggml.token_type"].Int(3) != typeControl {
		t.Fatalf("BPE key/values %s", EncodeKVs(c.KVs(1)))
	}
	if ft, _ := kv.u32("general.file_type"); ft != 1 {
		t.Fatal("file_type")
	}
	if p, _ := c.Tensor("model.layers.0.self_attn.q_proj.weight", []int64{8, 8}); p.Heads != 2 {
		t.Fatal("mistral q_proj not permuted")
	}
	files.Config = fmtConfig("Qwen2ForCausalLM", 4)
	q, _, err := NewToGGUF(files, "m")
	if err != nil || q.Arch != "qwen2" {
		t.Fatal(err)
	}
	back, why, err := NewFromGGUF(q.KVs(1))
	if err != nil || back == nil {
		t.Fatalf("qwen2 back: %q %v", why, err)
	}
	p, err := back.Tensor("blk.0.attn_k.bias", []int64{4})
	if err != nil || p.Name != "model.layers.0.self_attn.k_proj.bias" || p.Heads != 0 {
		t.Fatalf("%+v %v", p, err)
	}
	out, err := back.Files(true, "bfloat16")
	if err != nil || !bytes.Contains(out[ConfigFile], []byte(`"Qwen2ForCausalLM"`)) || out[TokenizerJSONFile] == nil {
		t.Fatalf("%v %s", err, out[ConfigFile])
	}
}

// TestSpecialTokens: tokenizer_config.json's tokens resolve through
// added_tokens (string or {"content"}), a null one falls back to
// config.json's id, add_bos/add_eos and a default template of a list.
func TestSpecialTokens(t *testing.T) {
	tc := map[string]json.RawMessage{}
	_ = json.Unmarshal([]byte(`{"bos_token": null, "eos_token": {"content": "<|im_end|>"}, "pad_token": "<|endoftext|>",
 "add_bos_token": false, "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]}`), &tc)
	cfg, _ := parseConfig([]byte(`{"bos_token_id": 0}`))
	added := []addedToken{{ID: 2, Content: "<|endoftext|>"}, {ID: 3, Content: "<|im_end|>"}}
	kvs, err := specialKVs(tc, added, []string{"a", "b", "<|endoftext|>", "<|im_end|>"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := kvMapOf(kvs)
	for k, want := range map[string]uint64{"tokenizer.ggml.bos_token_id": 0, "tokenizer.ggml.eos_token_id": 3, "tokenizer.ggml.padding_token_id": 2, "tokenizer.ggml.add_bos_token": 0} {
		if got, ok := m.u32(k); !ok || got != want {
			t.Errorf("%s = %d %v, want %d", k, got, ok, want)
		}
	}
	if tmpl, _ := m.str("tokenizer.chat_template"); tmpl != "D" {
		t.Errorf("chat_template %q", tmpl)
	}
}

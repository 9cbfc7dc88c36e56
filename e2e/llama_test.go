package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/gguf"
	"github.com/mstore/mstore/internal/formats/safetensors"
	"github.com/mstore/mstore/internal/testenv"
)

// llamaText is tokenized by every model: ASCII, CJK, accents, digits,
// whitespace runs and a special token's text.
const llamaText = "Hello world! 你好，世界。 ¿Qué tal? 12345  tabs\tand\nnewlines </s> <|endoftext|>"

// llamaOut is one model's line of e2e/testdata/llama_run.mjs.
type llamaOut struct {
	Path   string `json:"path"`
	Tokens []int  `json:"tokens"`
	Greedy []int  `json:"greedy"`
	Steps  []struct {
		SHA256 string          `json:"sha256"`
		N      int             `json:"n"`
		Top    [][]json.Number `json:"top"`
	} `json:"steps"`
}

type llamaModel struct {
	path      string
	vocabOnly bool
}

// llamaRun loads the models in llama.cpp (node-llama-cpp's prebuilt CPU
// binary in .ci/llama, installed by .ci/run) and returns what it made of
// llamaText, with steps greedy steps of the non-vocabulary models. It
// skips (fails under MSTORE_REQUIRE_TESTDATA=1) where node or the package
// is missing.
func llamaRun(t *testing.T, steps int, models ...llamaModel) []llamaOut {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node is not installed: the llama.cpp check is skipped")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(root, ".ci", "llama", "node_modules", "node-llama-cpp")
	for _, p := range []string{pkg, filepath.Join(root, ".ci", "llama", "node_modules", "@node-llama-cpp", "linux-x64")} {
		if _, err := os.Stat(p); err != nil {
			testenv.Missing(t, "%s is missing (.ci/run installs node-llama-cpp@3.22.1 and @node-llama-cpp/linux-x64@3.22.1 into .ci/llama)", p)
		}
	}
	type specModel struct {
		Path      string `json:"path"`
		VocabOnly bool   `json:"vocabOnly"`
	}
	spec := struct {
		Text   string      `json:"text"`
		Steps  int         `json:"steps"`
		Models []specModel `json:"models"`
	}{Text: llamaText, Steps: steps}
	for _, m := range models {
		spec.Models = append(spec.Models, specModel{m.path, m.vocabOnly})
	}
	b, _ := json.Marshal(spec)
	cmd := exec.Command(node, filepath.Join(root, "e2e", "testdata", "llama_run.mjs"), pkg, string(b))
	cmd.Env = append(os.Environ(), "NODE_LLAMA_CPP_SKIP_DOWNLOAD=true")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("llama.cpp fails: %v\n%s\n%s", err, out, stderr.String())
	}
	var res []llamaOut
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var o llamaOut
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			t.Fatalf("llama_run.mjs printed %q: %v", sc.Text(), err)
		}
		res = append(res, o)
	}
	if len(res) != len(models) {
		t.Fatalf("llama.cpp answered for %d of %d models\n%s", len(res), len(models), stderr.String())
	}
	return res
}

func sameInts(a, b []int) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// firstGGUF is the first .gguf file of a checkout (the first shard of a
// split one: llama.cpp finds the others).
func firstGGUF(t *testing.T, dir string) string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*.gguf"))
	if len(paths) == 0 {
		t.Fatalf("no .gguf file in %s: %v", dir, dirEntries(t, dir))
	}
	return paths[0]
}

// TestLlamaCppRunsGGUFRelayouts: llama.cpp loads every GGUF re-layout of
// llama-2-tiny-random.gguf (split, merged back, re-aligned) and gives the
// same tokens, the same greedy continuation and bit-identical logits as
// on the original; a --dtype cast loads and runs (its 1-D tensors stay
// F32: a BF16 norm makes llama.cpp abort) and, F16 → F32 being exact,
// continues the same.
func TestLlamaCppRunsGGUFRelayouts(t *testing.T) {
	src := filepath.Join(sharedTestdata(t, "gguf"), "llama-2-tiny-random.gguf")
	c := newCLI(t)
	c.add(src, "--name", "tiny")
	tmp := t.TempDir()
	split, aligned, f32, bf16, merged := filepath.Join(tmp, "split"), filepath.Join(tmp, "aligned"), filepath.Join(tmp, "f32"), filepath.Join(tmp, "bf16"), filepath.Join(tmp, "merged")
	c.ok("checkout", "tiny", split, "--split-max-tensors", "5")
	if n, _ := filepath.Glob(filepath.Join(split, "*.gguf")); len(n) != 3 {
		t.Fatalf("split into %d files", len(n))
	}
	c.add(split, "--name", "tiny-split")
	c.ok("checkout", "tiny-split", merged, "--split-max-tensors", "1000")
	c.ok("checkout", "tiny", aligned, "--alignment", "4096")
	c.ok("checkout", "tiny", f32, "--dtype", "f32")
	c.ok("checkout", "tiny", bf16, "--dtype", "bf16")
	for _, dir := range []string{f32, bf16} {
		l, _ := parseCheckedOut(t, dir)
		for _, tn := range l.Tensors {
			if len(tn.Shape) == 1 && tn.DType != "F32" {
				t.Fatalf("%s: 1-D tensor %s is %s after --dtype", dir, tn.Name, tn.DType)
			}
		}
	}
	out := llamaRun(t, 4, llamaModel{path: src}, llamaModel{path: firstGGUF(t, split)}, llamaModel{path: firstGGUF(t, merged)},
		llamaModel{path: firstGGUF(t, aligned)}, llamaModel{path: firstGGUF(t, f32)}, llamaModel{path: firstGGUF(t, bf16)})
	want := out[0]
	if len(want.Greedy) != 4 || len(want.Steps) != 4 || want.Steps[0].N != 32000 {
		t.Fatalf("original: %+v", want)
	}
	for i, o := range out[1:] {
		if !sameInts(o.Tokens, want.Tokens) {
			t.Errorf("%s: tokens %v, want %v", o.Path, o.Tokens, want.Tokens)
		}
		if len(o.Steps) != len(want.Steps) {
			t.Fatalf("%s: %d steps", o.Path, len(o.Steps))
		}
		if i < 3 { // no cast: bit-identical
			for s := range want.Steps {
				if o.Steps[s].SHA256 != want.Steps[s].SHA256 {
					t.Errorf("%s: step %d probabilities differ from the original's", o.Path, s)
				}
			}
		}
		if i < 4 && !sameInts(o.Greedy, want.Greedy) {
			t.Errorf("%s: greedy %v, want %v", o.Path, o.Greedy, want.Greedy)
		}
	}
}

// bf16Values is n pseudo-random BF16 values in ±scale (no NaN or Inf, as
// random bytes would give).
func bf16Values(seed uint64, n int, scale float32) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, 2*n)
	for i := range n {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits((r.Float32()*2-1)*scale)>>16))
	}
	return b
}

func f32Values(seed uint64, n int, scale, offset float32) []byte {
	r := rand.New(rand.NewPCG(seed, 9))
	b := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits((r.Float32()*2-1)*scale+offset))
	}
	return b
}

// hfModel writes an HF directory: config.json, the tokenizer files
// rebuilt from a real vocabulary GGUF, and model.safetensors with small
// random weights of a one-layer model (GQA: 2 heads, 1 KV head); extra
// are more config.json fields ("rope_scaling": {...}).
func hfModel(t *testing.T, dir, vocabFile, arch string, dtype string, bias, tied bool, extra ...string) {
	t.Helper()
	b, err := os.ReadFile(vocabFile)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(vocabFile)
	l, err := gguf.Codec.Parse(formattest.NewMemDir(map[string][]byte{name: b}), []string{name})
	if err != nil {
		t.Fatal(err)
	}
	kvs, err := gguf.DecodeKVs([]byte(l.Files[0].Meta[gguf.MetaKV]))
	if err != nil {
		t.Fatal(err)
	}
	files, err := gguf.TokenizerFiles(kvs)
	if err != nil {
		t.Fatal(err)
	}
	var vocab int
	for _, kv := range kvs {
		if kv.Key == "tokenizer.ggml.tokens" {
			vocab = kv.Value.Len()
		}
	}
	const hidden, ffn, heads, kvHeads = 16, 32, 2, 1 // head_dim 8: Permute is not its own inverse
	files["config.json"] = fmt.Appendf(nil, `{"architectures": [%q], "model_type": "x", "hidden_size": %d, "intermediate_size": %d,
  "num_hidden_layers": 1, "num_attention_heads": %d, "num_key_value_heads": %d, "max_position_embeddings": 256,
  "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "vocab_size": %d, "tie_word_embeddings": %v, "torch_dtype": "bfloat16"%s}`,
		arch, hidden, ffn, heads, kvHeads, vocab, tied, strings.Join(append([]string{""}, extra...), ", "))
	w := func(name string, seed uint64, shape ...int64) tensor {
		n := 1
		for _, d := range shape {
			n *= int(d)
		}
		if dtype == "F32" {
			return tensor{name: name, dtype: "F32", shape: shape, data: f32Values(seed, n, 0.5, 0)}
		}
		return tensor{name: name, dtype: dtype, shape: shape, data: bf16Values(seed, n, 0.5)}
	}
	norm := func(name string, seed uint64) tensor {
		x := w(name, seed, hidden)
		if dtype == "F32" {
			x.data = f32Values(seed, hidden, 0.1, 1)
		}
		return x
	}
	kvDim := int64(hidden / heads * kvHeads)
	ts := []tensor{
		w("model.embed_tokens.weight", 1, int64(vocab), hidden),
		norm("model.layers.0.input_layernorm.weight", 2),
		w("model.layers.0.self_attn.q_proj.weight", 3, hidden, hidden),
		w("model.layers.0.self_attn.k_proj.weight", 4, kvDim, hidden),
		w("model.layers.0.self_attn.v_proj.weight", 5, kvDim, hidden),
		w("model.layers.0.self_attn.o_proj.weight", 6, hidden, hidden),
		norm("model.layers.0.post_attention_layernorm.weight", 7),
		w("model.layers.0.mlp.gate_proj.weight", 8, ffn, hidden),
		w("model.layers.0.mlp.up_proj.weight", 9, ffn, hidden),
		w("model.layers.0.mlp.down_proj.weight", 10, hidden, ffn),
		norm("model.norm.weight", 11),
		{name: "model.layers.0.self_attn.rotary_emb.inv_freq", dtype: "F32", shape: []int64{2}, data: f32Values(12, 2, 1, 0)},
	}
	if bias {
		ts = append(ts, w("model.layers.0.self_attn.q_proj.bias", 13, hidden), w("model.layers.0.self_attn.k_proj.bias", 14, kvDim),
			w("model.layers.0.self_attn.v_proj.bias", 15, kvDim))
	}
	if !tied {
		ts = append(ts, w("lm_head.weight", 16, int64(vocab), hidden))
	}
	files["model.safetensors"] = safetensorsFile(ts, nil)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func keysOfKVs(kvs []gguf.KV) []string {
	var k []string
	for _, kv := range kvs {
		k = append(k, kv.Key)
	}
	return k
}

// hfTokenize tokenizes text with the HF tokenizer files of dir in
// @huggingface/tokenizers (pure JS, in .ci/llama).
func hfTokenize(t *testing.T, dir, text string) []int {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(root, ".ci", "llama", "node_modules", "@huggingface", "tokenizers")
	if _, err := os.Stat(pkg); err != nil {
		testenv.Missing(t, "%s is missing (.ci/run installs @huggingface/tokenizers into .ci/llama)", pkg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node is not installed")
	}
	var stderr bytes.Buffer
	cmd := exec.Command(node, filepath.Join(root, "e2e", "testdata", "hf_tokenize.mjs"), pkg, dir, text)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("@huggingface/tokenizers fails on %s: %v\n%s", dir, err, stderr.String())
	}
	var ids []int
	if err := json.Unmarshal(out, &ids); err != nil {
		t.Fatalf("hf_tokenize.mjs printed %q", out)
	}
	return ids
}

// TestGGUFToHFAndBack: llama-2-tiny-random.gguf checks out --format
// safetensors as an HF directory that torch alone (e2e/testdata/
// hf_check.py) finds consistent — HF names, shapes agreeing with the
// rebuilt config.json, q/k weights that the converter's own permute turns
// back into the GGUF's bytes — with a tokenizer.model and
// tokenizer_config.json; added again and checked out --format gguf, it is
// the original file byte for byte, and llama.cpp gives it the same logits.
// The only new blobs are the permuted tensors and the new small files.
func TestGGUFToHFAndBack(t *testing.T) {
	src := filepath.Join(sharedTestdata(t, "gguf"), "llama-2-tiny-random.gguf")
	py := "/usr/bin/python3"
	if exec.Command(py, "-c", "import torch").Run() != nil {
		testenv.Missing(t, "%s with torch is missing", py)
	}
	c := newCLI(t)
	c.add(src, "--name", "tiny")
	tmp := t.TempDir()
	hf, back := filepath.Join(tmp, "hf"), filepath.Join(tmp, "back")
	c.ok("checkout", "tiny", hf, "--format", "safetensors")
	if got := dirEntries(t, hf); !equalStrings(got, []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer.model", "tokenizer_config.json"}) {
		t.Fatalf("HF checkout holds %v", got)
	}
	out, err := exec.Command(py, filepath.Join("testdata", "hf_check.py"), hf).CombinedOutput()
	if err != nil {
		t.Fatalf("hf_check.py: %v\n%s", err, out)
	}
	var chk struct {
		Names    []string          `json:"names"`
		Permuted map[string]string `json:"permuted"`
	}
	if err := json.Unmarshal(out, &chk); err != nil {
		t.Fatalf("hf_check.py printed %s", out)
	}
	orig, _ := os.ReadFile(src)
	l, err := gguf.Codec.Parse(formattest.NewMemDir(map[string][]byte{"m.gguf": orig}), []string{"m.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	data, err := formattest.TensorData(l, map[string][]byte{"m.gguf": orig})
	if err != nil {
		t.Fatal(err)
	}
	for i, tn := range l.Tensors {
		hfName, _ := gguf.HFName(tn.Name)
		want, ok := chk.Permuted[hfName]
		if strings.HasSuffix(tn.Name, "attn_q.weight") || strings.HasSuffix(tn.Name, "attn_k.weight") {
			if !ok || want != sha256Hex(data[i]) {
				t.Errorf("%s: the converter's permute of %s is not the GGUF tensor's bytes", tn.Name, hfName)
			}
		}
	}
	if len(chk.Names) != len(l.Tensors) {
		t.Errorf("HF names %v", chk.Names)
	}
	c.add(hf, "--name", "tiny-hf")
	c.ok("checkout", "tiny-hf", back, "--format", "gguf")
	got, err := os.ReadFile(filepath.Join(back, "model.gguf"))
	if err != nil || !bytes.Equal(got, orig) {
		t.Fatalf("GGUF → HF → GGUF is not the original file (%d bytes, want %d): %v", len(got), len(orig), err)
	}
	run := llamaRun(t, 2, llamaModel{path: src}, llamaModel{path: filepath.Join(back, "model.gguf")})
	if run[0].Steps[0].SHA256 != run[1].Steps[0].SHA256 || !sameInts(run[0].Greedy, run[1].Greedy) {
		t.Errorf("llama.cpp: the round trip's logits differ")
	}
	// The rebuilt tokenizer.json in a real HF tokenizer implementation.
	if ids := hfTokenize(t, hf, llamaText); !sameInts(ids, run[0].Tokens) {
		t.Errorf("@huggingface/tokenizers on the HF checkout: %v\nllama.cpp on the original: %v", ids, run[0].Tokens)
	}
}

// TestHFTokenizerFromGGUF: the tokenizer.json rebuilt from a real
// byte-level BPE vocabulary (ggml-vocab-gpt-2.gguf) or SentencePiece one
// (ggml-vocab-llama-spm.gguf, as transformers' LlamaConverter) loads in
// @huggingface/tokenizers and tokenizes llamaText to the ids llama.cpp
// gives on the vocabulary file.
func TestHFTokenizerFromGGUF(t *testing.T) {
	var models []llamaModel
	var ids [][]int
	for _, v := range []string{"ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf"} {
		vocab := filepath.Join(sharedTestdata(t, "gguf"), v)
		dir := filepath.Join(t.TempDir(), "hf")
		hfModel(t, dir, vocab, "Qwen2ForCausalLM", "F32", true, true)
		ids = append(ids, hfTokenize(t, dir, llamaText))
		models = append(models, llamaModel{path: vocab, vocabOnly: true})
	}
	for i, o := range llamaRun(t, 0, models...) {
		if !sameInts(ids[i], o.Tokens) {
			t.Errorf("%s: @huggingface/tokenizers: %v\nllama.cpp on the vocabulary: %v", o.Path, ids[i], o.Tokens)
		}
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestHFToGGUFNotConvertedSaysSo: an HF directory whose config.json lacks
// a hyper-parameter llama.cpp needs is written as GGUF with its names kept
// and a note saying llama.cpp will not run it and why.
func TestHFToGGUFNotConvertedSaysSo(t *testing.T) {
	vocab := filepath.Join(sharedTestdata(t, "gguf"), "ggml-vocab-llama-spm.gguf")
	dir := filepath.Join(t.TempDir(), "hf")
	hfModel(t, dir, vocab, "LlamaForCausalLM", "BF16", false, false)
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	writeFile(t, filepath.Join(dir, "config.json"), bytes.Replace(cfg, []byte(`"max_position_embeddings": 256,`), nil, 1))
	c := newCLI(t)
	c.add(dir, "--name", "m")
	out := filepath.Join(t.TempDir(), "out")
	var res struct {
		Note string `json:"note"`
	}
	c.json(&res, "checkout", "m", out, "--format", "gguf", "--json")
	if !strings.Contains(res.Note, "llama.cpp will not run it") || !strings.Contains(res.Note, "max_position_embeddings") {
		t.Fatalf("note %q", res.Note)
	}
	l, _ := parseCheckedOut(t, out)
	if l.Tensors[0].Name != "model.embed_tokens.weight" && l.Tensors[0].Name != "lm_head.weight" {
		t.Fatalf("tensor names changed: %s", l.Tensors[0].Name)
	}
}

// TestDTypeUpdatesTorchDType: a checkout with --dtype, into every target
// that casts (SafeTensors, PyTorch, GGUF, .npz, and a GGUF version with
// its own config.json converted to HF), writes config.json with
// torch_dtype set to the new dtype (the rest of the file as it was), so
// that adding the result raises no torch_dtype warning; before, the cast
// model failed mstore's own AP-5 check.
func TestDTypeUpdatesTorchDType(t *testing.T) {
	vocab := filepath.Join(sharedTestdata(t, "gguf"), "ggml-vocab-llama-spm.gguf")
	dir := filepath.Join(t.TempDir(), "hf")
	hfModel(t, dir, vocab, "LlamaForCausalLM", "BF16", false, false)
	c := newCLI(t)
	c.add(dir, "--name", "m")
	before, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	// A GGUF version with its own config.json, converted back to HF.
	ggufDir := filepath.Join(t.TempDir(), "g")
	c.ok("checkout", "m", ggufDir, "--format", "gguf")
	c.add(ggufDir, "--name", "g")
	for _, k := range []struct {
		ref, torch string
		args       []string
	}{
		{"m", "float16", []string{"--dtype", "f16"}},
		{"m", "float16", []string{"--format", "pytorch", "--dtype", "f16"}},
		{"m", "float16", []string{"--format", "gguf", "--dtype", "f16"}},
		{"m", "float32", []string{"--format", "npz", "--dtype", "f32"}},
		{"g", "float16", []string{"--format", "safetensors", "--dtype", "f16"}},
	} {
		out := filepath.Join(t.TempDir(), "cast")
		c.ok(append([]string{"checkout", k.ref, out}, k.args...)...)
		after, _ := os.ReadFile(filepath.Join(out, "config.json"))
		if want := bytes.Replace(before, []byte(`"torch_dtype": "bfloat16"`), []byte(`"torch_dtype": "`+k.torch+`"`), 1); !bytes.Equal(after, want) {
			t.Errorf("%s %v: config.json:\n%s", k.ref, k.args, after)
		}
		if k.ref == "m" && len(k.args) == 2 {
			if res := c.add(out, "--name", "m-f16"); len(res.Warnings) != 0 {
				t.Errorf("adding the cast checkout warns: %v", res.Warnings)
			}
		}
	}
	// Without --dtype the stored config.json is written as it is.
	same := filepath.Join(t.TempDir(), "same")
	c.ok("checkout", "m", same, "--max-shard-size", "100KB")
	if b, _ := os.ReadFile(filepath.Join(same, "config.json")); !bytes.Equal(b, before) {
		t.Fatal("config.json changed without --dtype")
	}
}

// checkHFToGGUFTensors checks the tensors of a GGUF converted from the HF
// directory dir against the HF tensors independently: q/k are what torch
// makes of the HF ones with convert_hf_to_gguf.py's permute
// (e2e/testdata/hf_check.py), the other 2-D tensors the same bytes, and
// the F32 1-D ones the BF16 values widened.
func checkHFToGGUFTensors(t *testing.T, dir string, l *formats.Layout, files map[string][]byte) {
	t.Helper()
	py := "/usr/bin/python3"
	if exec.Command(py, "-c", "import torch").Run() != nil {
		testenv.Missing(t, "%s with torch is missing", py)
	}
	out, err := exec.Command(py, filepath.Join("testdata", "hf_check.py"), dir).CombinedOutput()
	if err != nil {
		t.Fatalf("hf_check.py: %v\n%s", err, out)
	}
	var chk struct {
		Permuted map[string]string `json:"permuted"`
	}
	if err := json.Unmarshal(out, &chk); err != nil {
		t.Fatalf("hf_check.py printed %s", out)
	}
	data, err := formattest.TensorData(l, files)
	if err != nil {
		t.Fatal(err)
	}
	src := readTree(t, dir)
	sl, err := safetensors.Codec.Parse(formattest.NewMemDir(src), []string{"model.safetensors"})
	if err != nil {
		t.Fatal(err)
	}
	srcData, _ := formattest.TensorData(sl, src)
	hfBytes := map[string][]byte{}
	for i, tn := range sl.Tensors {
		hfBytes[tn.Name] = srcData[i]
	}
	permuted := 0
	for i, tn := range l.Tensors {
		hfName, _ := gguf.HFName(tn.Name)
		switch {
		case chk.Permuted[hfName] != "":
			permuted++
			if sha256Hex(data[i]) != chk.Permuted[hfName] {
				t.Errorf("%s is not torch's permute of %s", tn.Name, hfName)
			}
		case len(tn.Shape) == 1:
			b := hfBytes[hfName]
			for j := 0; j < len(b)/2; j++ {
				if binary.LittleEndian.Uint32(data[i][4*j:]) != uint32(binary.LittleEndian.Uint16(b[2*j:]))<<16 {
					t.Fatalf("%s[%d] is not %s widened to F32", tn.Name, j, hfName)
				}
			}
		case !bytes.Equal(data[i], hfBytes[hfName]):
			t.Errorf("%s: bytes differ from %s", tn.Name, hfName)
		}
	}
	if permuted != 2 {
		t.Errorf("%d permuted tensors checked, want q and k", permuted)
	}
}

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/gguf"
	"github.com/mstore/mstore/internal/testenv"
)

// TestLlamaCppPreTokenizers: for each pre-tokenizer the GGUF codec maps
// (tokenizer.json's declaration → tokenizer.ggml.pre), a qwen2 directory
// whose tokenizer.json declares it (the gpt-2 vocabulary and merges)
// converts to a GGUF that llama.cpp tokenizes exactly as
// @huggingface/tokenizers tokenizes with the tokenizer.json itself: the
// name mstore writes selects in llama.cpp the pre-tokenizer the file
// declares.
func TestLlamaCppPreTokenizers(t *testing.T) {
	vocab := filepath.Join(sharedTestdata(t, "gguf"), "ggml-vocab-gpt-2.gguf")
	b, err := os.ReadFile(vocab)
	if err != nil {
		t.Fatal(err)
	}
	l, err := gguf.Codec.Parse(formattest.NewMemDir(map[string][]byte{"v.gguf": b}), []string{"v.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	kvs, err := gguf.DecodeKVs([]byte(l.Files[0].Meta[gguf.MetaKV]))
	if err != nil {
		t.Fatal(err)
	}
	c := newCLI(t)
	tmp := t.TempDir()
	pres := []string{"gpt-2", "llama-bpe", "qwen2"}
	var models []llamaModel
	var want [][]int
	for _, pre := range pres {
		dir := filepath.Join(tmp, pre)
		hfModel(t, dir, vocab, "Qwen2ForCausalLM", "F32", true, true)
		with := append([]gguf.KV(nil), kvs...)
		for i := range with {
			if with[i].Key == "tokenizer.ggml.pre" {
				with[i].Value = gguf.StringValue(pre)
			}
		}
		files, err := gguf.TokenizerFiles(with)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "tokenizer.json"), files["tokenizer.json"])
		want = append(want, hfTokenize(t, dir, llamaText))
		c.add(dir, "--name", pre)
		out := filepath.Join(tmp, pre+"-gguf")
		c.ok("checkout", pre, out, "--format", "gguf")
		gl, _ := parseCheckedOut(t, out)
		got, _ := gguf.DecodeKVs([]byte(gl.Files[0].Meta[gguf.MetaKV]))
		for _, kv := range got {
			if kv.Key == "tokenizer.ggml.pre" && kv.Value.Strs[0] != pre {
				t.Fatalf("%s: tokenizer.ggml.pre %q", pre, kv.Value.Strs[0])
			}
		}
		models = append(models, llamaModel{path: firstGGUF(t, out)})
	}
	for i, o := range llamaRun(t, 0, models...) {
		if !sameInts(o.Tokens, want[i]) {
			t.Errorf("%s: llama.cpp %v\n@huggingface/tokenizers %v", pres[i], o.Tokens, want[i])
		}
	}
	if sameInts(want[0], want[2]) {
		t.Errorf("gpt-2 and qwen2 pre-tokenize %q alike: the text does not tell them apart", llamaText)
	}
}

// TestLlamaCppRunsPyTorchHFConversion: the same HF llama directory with
// its weights in pytorch_model.bin (torch.save of the state dict) converts
// to a GGUF that llama.cpp runs with logits bit-identical to the
// SafeTensors directory's conversion.
func TestLlamaCppRunsPyTorchHFConversion(t *testing.T) {
	py := "/usr/bin/python3"
	if exec.Command(py, "-c", "import torch").Run() != nil {
		testenv.Missing(t, "%s with torch is missing", py)
	}
	vocab := filepath.Join(sharedTestdata(t, "gguf"), "ggml-vocab-llama-spm.gguf")
	tmp := t.TempDir()
	st, pt := filepath.Join(tmp, "st"), filepath.Join(tmp, "pt")
	hfModel(t, st, vocab, "LlamaForCausalLM", "BF16", false, false)
	hfModel(t, pt, vocab, "LlamaForCausalLM", "BF16", false, false)
	script := `import json, struct, sys, torch
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
sd = {}
for k, v in json.loads(raw[8:8 + n]).items():
    a, b = v["data_offsets"]
    dt = {"BF16": torch.bfloat16, "F32": torch.float32}[v["dtype"]]
    sd[k] = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=dt).reshape(v["shape"]).clone()
torch.save(sd, sys.argv[2])`
	if out, err := exec.Command(py, "-c", script, filepath.Join(pt, "model.safetensors"), filepath.Join(pt, "pytorch_model.bin")).CombinedOutput(); err != nil {
		t.Fatalf("torch.save: %v\n%s", err, out)
	}
	if err := os.Remove(filepath.Join(pt, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t)
	if res := c.add(pt, "--name", "pt"); res.Format != "pytorch" {
		t.Fatalf("added as %s", res.Format)
	}
	c.add(st, "--name", "st")
	c.ok("checkout", "pt", pt+"-gguf", "--format", "gguf")
	c.ok("checkout", "st", st+"-gguf", "--format", "gguf")
	out := llamaRun(t, 2, llamaModel{path: firstGGUF(t, st+"-gguf")}, llamaModel{path: firstGGUF(t, pt+"-gguf")})
	if len(out[1].Steps) != 2 || out[0].Steps[0].SHA256 != out[1].Steps[0].SHA256 || !sameInts(out[0].Greedy, out[1].Greedy) {
		t.Fatalf("PyTorch conversion: %+v\nSafeTensors conversion: %+v", out[1], out[0])
	}
}

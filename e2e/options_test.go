package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The checkout options, each as one use of it.
var checkoutOptions = []struct {
	name string
	args []string
}{
	{"--max-shard-size", []string{"--max-shard-size", "20KB"}},
	{"--alignment", []string{"--alignment", "64"}},
	{"--external-data", []string{"--external-data", "w.data"}},
	{"--inline-data", []string{"--inline-data"}},
	{"--size-threshold", []string{"--size-threshold", "0"}},
	{"--split-max-size", []string{"--split-max-size", "20KB"}},
	{"--split-max-tensors", []string{"--split-max-tensors", "2"}},
	{"--dtype", []string{"--dtype", "f16"}},
	{"--clamp", []string{"--dtype", "f16", "--clamp"}},
	{"--clamp without --dtype", []string{"--clamp"}},
	{"--dtype with nothing to cast", []string{"--dtype", "f32"}},
	{"--extract", []string{"--extract"}},
	{"--drop-non-tensors", []string{"--drop-non-tensors"}},
}

// TestCheckoutOptionsUsedOrRefused: every checkout option against every
// target format is either used (the checkout succeeds) or refused with
// schema_error naming it, nothing written. An option the target reads but
// that has nothing to act on (--dtype f32 of an F32 model,
// --drop-non-tensors where nothing is dropped) is refused too.
func TestCheckoutOptionsUsedOrRefused(t *testing.T) {
	c := newCLI(t)
	hf := t.TempDir() // F32 tensors of small values, which F16 holds
	writeFiles(t, hf, map[string][]byte{
		"model.safetensors": safetensorsFile([]tensor{
			{name: "a.weight", dtype: "F32", shape: []int64{64, 64}, data: f32Values(1, 64*64, 1, 0)},
			{name: "b.weight", dtype: "F32", shape: []int64{64, 64}, data: f32Values(2, 64*64, 1, 0)},
			{name: "c.weight", dtype: "F32", shape: []int64{64, 64}, data: f32Values(3, 64*64, 1, 0)},
		}, map[string]string{"format": "pt"}),
		"config.json": configJSON("float32"),
	})
	st := c.add(hf, "--name", "st").Digest
	mnist := c.add(filepath.Join(sharedTestdata(t, "onnx"), "burn-onnx-mnist.onnx"), "--name", "mnist").Digest
	archive := c.add(filepath.Join(mpkFixtureDir(t), "fixtures", "valid_stable_order.tar.gz"), "--name", "mpk").Digest

	// What each target uses; every other option is schema_error.
	targets := []struct {
		format, source string
		base           []string // what a re-layout of the target needs beside the option
		uses           []string
	}{
		{"safetensors", st, nil, []string{"--max-shard-size", "--dtype", "--clamp"}},
		{"gguf", st, nil, []string{"--max-shard-size", "--alignment", "--split-max-size", "--split-max-tensors", "--dtype", "--clamp"}},
		{"pytorch", st, nil, []string{"--max-shard-size", "--dtype", "--clamp"}},
		{"npz", st, nil, []string{"--dtype", "--clamp"}},
		{"onnx", mnist, []string{"--external-data", "w.data"}, []string{"--external-data", "--inline-data", "--size-threshold", "--alignment"}},
		{"mpk", archive, nil, []string{"--extract"}},
	}
	for _, tg := range targets {
		for _, o := range checkoutOptions {
			t.Run(tg.format+"/"+o.name, func(t *testing.T) {
				c := &cli{t: t, store: c.store}
				out := filepath.Join(t.TempDir(), "out")
				args := append([]string{"checkout", tg.source, out, "--format", tg.format}, o.args...)
				if o.name != "--external-data" && o.name != "--inline-data" {
					args = append(args, tg.base...)
				}
				if slices.Contains(tg.uses, o.name) {
					c.ok(args...)
					if o.name == "--size-threshold" { // 0: every tensor moves, the small ones too
						def := filepath.Join(t.TempDir(), "default")
						c.ok("checkout", tg.source, def, "--external-data", "w.data")
						all, _ := os.Stat(filepath.Join(out, "w.data"))
						some, _ := os.Stat(filepath.Join(def, "w.data"))
						if all == nil || some == nil || all.Size() <= some.Size() {
							t.Errorf("--size-threshold 0 did not move the tensors under 1024 bytes too")
						}
					}
					return
				}
				msg := c.fail("schema_error", args...)
				if flag := strings.Fields(o.name)[0]; !strings.Contains(msg, flag) {
					t.Errorf("the refusal does not name %s: %s", flag, msg)
				}
				if fileExists(out) {
					t.Error("a refused checkout left its destination")
				}
			})
		}
	}
}

// TestLossyConversionsSayWhatIsLeftOut: every conversion that loses what
// a version holds beside its tensors (an ONNX graph, GGUF key/values,
// SafeTensors __metadata__, the differing __metadata__ of a later shard,
// a checkpoint's other values) is
// lossy_conversion naming it; with --drop-non-tensors it is written, and
// the output, as text and --json, says what was left out.
func TestLossyConversionsSayWhatIsLeftOut(t *testing.T) {
	c := newCLI(t)
	mnist := c.add(filepath.Join(sharedTestdata(t, "onnx"), "burn-onnx-mnist.onnx"), "--name", "mnist").Digest
	llama := c.add(filepath.Join(sharedTestdata(t, "gguf"), "llama-2-tiny-random.gguf"), "--name", "llama").Digest
	meta := c.add(writeFile(t, filepath.Join(t.TempDir(), "m.safetensors"), safetensorsFile([]tensor{
		{name: "w", dtype: "F32", shape: []int64{8, 8}, data: f32Values(4, 64, 1, 0)},
	}, map[string]string{"format": "pt", "author": "me"})), "--name", "meta").Digest
	ck := c.add(filepath.Join(sharedTestdata(t, "pytorch"), "burn", "src__pytorch__tests__reader__test_data__checkpoint.pt"), "--name", "ck").Digest
	// Shards whose __metadata__ differ: only the first's is kept anywhere.
	shards := t.TempDir()
	files := shardedModel([]tensor{
		{name: "a", dtype: "F32", shape: []int64{8}, data: f32Values(5, 8, 1, 0)},
		{name: "b", dtype: "F32", shape: []int64{8}, data: f32Values(6, 8, 1, 0)},
	}, 2)
	files["model-00002-of-00002.safetensors"] = safetensorsFile([]tensor{{name: "b", dtype: "F32", shape: []int64{8}, data: f32Values(6, 8, 1, 0)}},
		map[string]string{"format": "pt", "step": "2"})
	writeFiles(t, shards, files)
	split := c.add(shards, "--name", "split").Digest

	cases := []struct {
		source string
		lost   string // what the refusal and the report name
		into   []string
		extra  []string // options that make the checkout a re-layout
	}{
		{mnist, "burn-onnx-mnist.onnx: its graph", []string{"safetensors", "gguf", "pytorch", "npz"}, nil},
		{llama, "GGUF key/values", []string{"pytorch", "npz"}, nil},
		{meta, "__metadata__ author", []string{"pytorch", "npz"}, nil},
		{ck, "values that are not tensors (", []string{"safetensors", "gguf", "npz"}, nil},
		{ck, "values that are not tensors (", []string{"pytorch"}, []string{"--max-shard-size", "1KB"}},
		{split, "model-00002-of-00002.safetensors: __metadata__ step, which differs", []string{"safetensors", "gguf"}, []string{"--max-shard-size", "1MB"}},
	}
	for _, k := range cases {
		for _, format := range k.into {
			t.Run(k.lost+" into "+format, func(t *testing.T) {
				c := &cli{t: t, store: c.store}
				out := filepath.Join(t.TempDir(), "out")
				args := append([]string{"checkout", k.source, out, "--format", format}, k.extra...)
				msg := c.fail("lossy_conversion", args...)
				if !strings.Contains(msg, k.lost) || !strings.Contains(msg, "--drop-non-tensors") {
					t.Errorf("the refusal does not say what is lost and how to accept it: %s", msg)
				}
				if fileExists(out) {
					t.Error("a refused conversion left its destination")
				}
				r := c.run(append(args, "--drop-non-tensors")...)
				if r.code != 0 || !strings.Contains(r.stderr, "left out (--drop-non-tensors): ") || !strings.Contains(r.stderr, k.lost) {
					t.Errorf("with --drop-non-tensors, the output does not say what was left out:\n%s", r)
				}
				var res struct {
					LeftOut []string `json:"left_out"`
				}
				args[2] = filepath.Join(t.TempDir(), "j")
				c.json(&res, append(args, "--drop-non-tensors")...)
				if b, _ := json.Marshal(res.LeftOut); !strings.Contains(string(b), k.lost) {
					t.Errorf("--json left_out: %s", b)
				}
			})
		}
	}
}

// TestVocabOnlyGGUF: a GGUF of a vocabulary (no tensors) re-lays out
// (split, alignment) byte for byte, converts to SafeTensors (with the
// tokenizer files of a llama-family vocabulary) and back to the original
// file, and is refused where the target would hold nothing (PyTorch,
// .npz) or the option has nothing to act on (--dtype).
func TestVocabOnlyGGUF(t *testing.T) {
	c := newCLI(t)
	for _, v := range []string{"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"} {
		src := filepath.Join(sharedTestdata(t, "gguf"), v)
		ref := strings.TrimSuffix(v, ".gguf")
		c.add(src, "--name", ref)
		relayouts := [][]string{{"--alignment", "32"}, {"--split-max-tensors", "1"}}
		if v != "ggml-vocab-llama-spm.gguf" {
			relayouts = nil // the conversion below is enough of a second vocabulary
		}
		for _, args := range relayouts {
			out := filepath.Join(t.TempDir(), "out")
			c.ok(append([]string{"checkout", ref, out}, args...)...)
			requireSameFile(t, src, filepath.Join(out, v))
		}
		st := filepath.Join(t.TempDir(), "st")
		c.ok("checkout", ref, st, "--format", "safetensors")
		if v == "ggml-vocab-llama-spm.gguf" {
			for _, f := range []string{"model.safetensors", "config.json", "tokenizer.model", "tokenizer.json", "tokenizer_config.json"} {
				if !fileExists(filepath.Join(st, f)) {
					t.Errorf("%s as SafeTensors: no %s", v, f)
				}
			}
		}
		c.add(st, "--name", ref+"-st")
		back := filepath.Join(t.TempDir(), "back")
		c.ok("checkout", ref+"-st", back, "--format", "gguf")
		requireSameFile(t, src, firstGGUF(t, back))
		if v != "ggml-vocab-llama-spm.gguf" {
			continue
		}
		for _, format := range []string{"pytorch", "npz"} {
			c.fail("lossy_conversion", "checkout", ref, filepath.Join(t.TempDir(), "x"), "--format", format)
			if msg := c.fail("schema_error", "checkout", ref, filepath.Join(t.TempDir(), "x"), "--format", format, "--drop-non-tensors"); !strings.Contains(msg, "no tensors") {
				t.Errorf("%s into %s: %s", v, format, msg)
			}
		}
		c.fail("schema_error", "checkout", ref, filepath.Join(t.TempDir(), "x"), "--dtype", "f16")
	}
}

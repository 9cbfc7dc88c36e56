package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/pytorch"
	"github.com/mstore/mstore/internal/testenv"
)

// requireTorch skips when Debian's python3-torch is missing.
func requireTorch(t *testing.T) {
	t.Helper()
	if !haveTorch() {
		testenv.Missing(t, "%s cannot import torch (install python3-torch, as .ci/run does)", debianPython)
	}
}

// A checkpoint saved by torch with shared storages, strided views and a
// tied weight: SafeTensors gets each state-dict tensor contiguous, and
// mstore's own checkpoint loads in torch to the same tensors.
func TestPyTorchViews(t *testing.T) {
	t.Parallel()
	requireTorch(t)
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	src := filepath.Join(work, "views.pt")
	if out, err := exec.Command(debianPython, filepath.Join(root, "e2e", "testdata", "torch_dump.py"), "--save-views", src).CombinedOutput(); err != nil {
		t.Fatalf("torch.save: %v\n%s", err, out)
	}
	c := newCLI(t)
	res := c.add(src)
	if res.Tensors >= 9 {
		t.Errorf("%d stored tensors for 9 state-dict tensors over 4 storages", res.Tensors)
	}
	if out := c.ok("show", "views"); !strings.Contains(out, "transposed") || !strings.Contains(out, "[1,6]") {
		t.Errorf("show does not list the views:\n%s", out)
	}
	st, pt, one := filepath.Join(work, "st"), filepath.Join(work, "pt"), filepath.Join(work, "one")
	c.ok("checkout", "views", st, "--format", "safetensors")
	c.ok("checkout", "views", pt, "--format", "pytorch", "--tensors", "*")
	c.ok("checkout", "views", one, "--format", "safetensors", "--tensors", "transposed")
	report := torchDump(t, src, filepath.Join(pt, "views.pt"))
	want := report[src].Tensors
	if len(want) != 9 {
		t.Fatalf("torch reads %d tensors from its own file: %+v", len(want), report[src])
	}
	requireSameTensors(t, "views as SafeTensors", want, safetensorsDump(t, st))
	requireSameTensors(t, "views written by mstore", want, report[filepath.Join(pt, "views.pt")].Tensors)
	requireSameTensors(t, "--tensors transposed", map[string]torchTensor{"transposed": want["transposed"]}, safetensorsDump(t, one))

	gg := filepath.Join(work, "gguf")
	c.ok("checkout", "views", gg, "--format", "gguf")
	l, files := parseCheckedOut(t, gg)
	data, err := formattest.TensorData(l, files)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Tensors) != len(want) {
		t.Fatalf("GGUF holds %d tensors, want %d", len(l.Tensors), len(want))
	}
	for i, tn := range l.Tensors {
		if w, ok := want[tn.Name]; !ok || sha(data[i]) != w.SHA256 {
			t.Errorf("GGUF tensor %s (%s) differs from torch's", tn.Name, tn.DType)
		}
	}
}

// Tensors of a PyTorch checkpoint that a SafeTensors version already holds
// share its blobs: only the checkpoint's zip headers and pickle are new.
func TestPyTorchCrossFormatDedup(t *testing.T) {
	ckpt := filepath.Join(sharedTestdata(t, "pytorch"), "burn-mnist.pt")
	converted := filepath.Join(t.TempDir(), "mnist-st")
	first := newCLI(t)
	first.add(ckpt, "--name", "mnist")
	first.ok("checkout", "mnist", converted, "--format", "safetensors")

	c := newCLI(t)
	st := c.add(converted, "--name", "mnist-st")
	pt := c.add(ckpt, "--name", "mnist-pt")
	if pt.NewBytes-c.manifestSize(pt.Digest) > 8<<10 || pt.LogicalBytes < 1<<20 {
		t.Fatalf("the checkpoint added %d new bytes of %d after its SafeTensors twin (%d): its tensors were not shared", pt.NewBytes, pt.LogicalBytes, st.LogicalBytes)
	}
	a, b := c.show("mnist-st").tensorDigests(), c.show("mnist-pt").tensorDigests()
	for name, d := range b {
		if a[name] != d {
			t.Errorf("tensor %s: digest %s in the checkpoint, %s in SafeTensors", name, d, a[name])
		}
	}
}

// Real SafeTensors files checked out with --format pytorch load in torch
// (weights_only=True) to the same tensors.
func TestSafetensorsToPyTorch(t *testing.T) {
	t.Parallel()
	requireTorch(t)
	dir := sharedTestdata(t, "safetensors")
	paths, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	c := newCLI(t)
	work := t.TempDir()
	var outs []string
	for i, p := range paths {
		name := "st" + string(rune('a'+i))
		c.add(p, "--name", name)
		out := filepath.Join(work, name)
		c.ok("checkout", name, out, "--format", "pytorch")
		outs = append(outs, filepath.Join(out, pytorch.DefaultFile))
	}
	report := torchDump(t, outs...)
	for i, p := range paths {
		got := report[outs[i]]
		if got.Error != "" || got.Loader != "weights_only" {
			t.Errorf("%s: torch.load(weights_only=True): %s", filepath.Base(p), got.Error)
			continue
		}
		requireSameTensors(t, filepath.Base(p)+" as PyTorch", safetensorsFileDump(t, p), got.Tensors)
	}
}

// A sharded checkpoint (pytorch_model-0000K-of-0000N.bin and its index) is
// one model: byte-identical checkout, SafeTensors conversion, re-sharding;
// an index that disagrees with its shards is refused.
func TestPyTorchSharded(t *testing.T) {
	t.Parallel()
	tensors := []tensor{
		randTensor("model.embed.weight", "F16", 1, 64, 16),
		randTensor("model.layers.0.w", "F32", 2, 16, 16),
		randTensor("model.layers.0.b", "F32", 3, 16),
		randTensor("model.norm", "BF16", 4, 16),
		randTensor("lm_head.weight", "F16", 5, 64, 16),
	}
	in := make([]formats.Tensor, len(tensors))
	data := make([][]byte, len(tensors))
	for i, tn := range tensors {
		in[i], data[i] = formats.Tensor{Name: tn.name, DType: tn.dtype, Shape: tn.shape, Size: tn.size()}, tn.data
	}
	l, err := pytorch.Plan(in, pytorch.PlanOptions{MaxShardSize: 2500})
	if err != nil {
		t.Fatal(err)
	}
	files, err := formattest.Materialize(l, data)
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(t.TempDir(), "model")
	writeFiles(t, model, files)
	writeFiles(t, model, map[string][]byte{"config.json": configJSON("float16")})
	c := newCLI(t)
	res := c.add(model)
	if res.Format != "pytorch" || res.Files != len(files)+1 || res.Tensors != len(tensors) || len(files) < 4 {
		t.Fatalf("added %+v from %d files", res, len(files))
	}
	same, st, resharded := filepath.Join(t.TempDir(), "same"), filepath.Join(t.TempDir(), "st"), filepath.Join(t.TempDir(), "re")
	c.ok("checkout", "model", same)
	requireSameTree(t, model, same)
	c.ok("checkout", "model", st, "--format", "safetensors")
	got := safetensorsDump(t, st)
	for _, tn := range tensors {
		if g := got[tn.name]; g.DType != tn.dtype || g.SHA256 != sha(tn.data) {
			t.Errorf("%s converted as %+v", tn.name, g)
		}
	}
	c.ok("checkout", "model", resharded, "--format", "pytorch", "--max-shard-size", "5000")
	if entries := dirEntries(t, resharded); len(entries) != 4 { // 2 shards, index, config.json
		t.Errorf("re-sharded into %v", entries)
	}

	broken := filepath.Join(t.TempDir(), "broken")
	writeFiles(t, broken, files)
	index := string(files["pytorch_model.bin.index.json"])
	writeFiles(t, broken, map[string][]byte{"pytorch_model.bin.index.json": []byte(strings.Replace(index, `"model.norm"`, `"model.gone"`, 1))})
	c.fail("schema_error", "add", broken)
	if haveTorch() {
		var shards []string
		for p := range files {
			if strings.HasSuffix(p, ".bin") {
				shards = append(shards, filepath.Join(same, p))
			}
		}
		all := map[string]torchTensor{}
		for _, r := range torchDump(t, shards...) {
			if r.Error != "" {
				t.Fatalf("torch.load of a shard: %s", r.Error)
			}
			for k, v := range r.Tensors {
				all[k] = v
			}
		}
		requireSameTensors(t, "shards in torch", got, all)
	} else {
		testenv.Degraded(t, "%s cannot import torch (install python3-torch, as .ci/run does): the shards are not loaded", debianPython)
	}
}

// A GGUF model into a checkpoint: its key/values (the tokenizer) would be
// lost, so --drop-non-tensors is needed; torch then reads its tensors.
func TestGGUFToPyTorch(t *testing.T) {
	src := filepath.Join(sharedTestdata(t, "gguf"), "llama-2-tiny-random.gguf")
	c := newCLI(t)
	c.add(src, "--name", "ll")
	out := filepath.Join(t.TempDir(), "pt")
	if msg := c.fail("lossy_conversion", "checkout", "ll", out, "--format", "pytorch"); !strings.Contains(msg, "key/values") {
		t.Errorf("refusal does not say what would be lost: %s", msg)
	}
	c.ok("checkout", "ll", out, "--format", "pytorch", "--drop-non-tensors")
	if !haveTorch() {
		testenv.Missing(t, "%s cannot import torch: the checkpoint is not loaded", debianPython)
	}
	r := torchDump(t, filepath.Join(out, pytorch.DefaultFile))[filepath.Join(out, pytorch.DefaultFile)]
	if r.Error != "" || len(r.Tensors) != len(c.show("ll").Manifest.Tensors) {
		t.Fatalf("torch.load: %+v", r)
	}
}

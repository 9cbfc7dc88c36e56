package e2e

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/gguf"
	"github.com/mstore/mstore/internal/formats/gguf/gguftest"
	"github.com/mstore/mstore/internal/testenv"
)

// ggufModel writes tensors as GGUF files with mstore's own planner and
// returns them by path.
func ggufModel(t *testing.T, tensors []tensor, opts gguf.PlanOptions) map[string][]byte {
	t.Helper()
	in := make([]formats.Tensor, len(tensors))
	data := make([][]byte, len(tensors))
	for i, tn := range tensors {
		in[i] = formats.Tensor{Name: tn.name, DType: tn.dtype, Shape: tn.shape, Size: tn.size()}
		data[i] = tn.data
	}
	l, err := gguf.Plan(in, opts)
	if err != nil {
		t.Fatal(err)
	}
	files, err := formattest.Materialize(l, data)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var ggufKVs = []gguf.KV{
	{Key: "general.architecture", Value: gguf.StringValue("llama")},
	{Key: "general.name", Value: gguf.StringValue("e2e")},
	{Key: "llama.block_count", Value: gguf.Uint32Value(3)},
	{Key: "tokenizer.ggml.tokens", Value: gguf.StringArray([]string{"<unk>", "<s>", "</s>", "▁the"})},
	{Key: "tokenizer.ggml.scores", Value: gguf.ArrayValue(gguf.TypeFloat32, []uint64{0, 0, 0, uint64(math.Float32bits(-1.5))})},
	{Key: "tokenizer.chat_template", Value: gguf.StringValue("{% for m in messages %}\n{{ m['content'] }}\n{% endfor %}")},
}

// parseCheckedOut parses the GGUF files in dir with mstore's codec and with
// gguf-parser-go, and fails unless both agree.
func parseCheckedOut(t *testing.T, dir string) (*formats.Layout, map[string][]byte) {
	t.Helper()
	files := readTree(t, dir)
	l, err := gguf.Codec.Parse(formattest.NewMemDir(files), formattest.ClaimedPaths(gguf.Codec, files))
	if err != nil {
		t.Fatalf("checked-out GGUF does not parse: %v", err)
	}
	if err := gguftest.Check(dir, l); err != nil {
		t.Fatalf("independent parser: %v", err)
	}
	return l, files
}

// TestGGUFRealFilesRoundTrip: every real GGUF file comes back byte for byte,
// vocabulary-only files (no tensors, no trailing padding) included.
func TestGGUFRealFilesRoundTrip(t *testing.T) {
	t.Parallel()
	dir := sharedTestdata(t, "gguf")
	paths, _ := filepath.Glob(filepath.Join(dir, "*.gguf"))
	if len(paths) == 0 {
		testenv.Missing(t, "no .gguf files in %s", dir)
	}
	c := newCLI(t)
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".gguf")
		res := c.add(p)
		if res.Format != "gguf" || res.Name != name {
			t.Fatalf("%s: added as %s %q", p, res.Format, res.Name)
		}
		dest := filepath.Join(t.TempDir(), name)
		c.ok("checkout", name, dest)
		want, _ := os.ReadFile(p)
		got, err := os.ReadFile(filepath.Join(dest, filepath.Base(p)))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s does not come back byte for byte (%v)", p, err)
		}
	}
	out := c.ok("show", "llama-2-tiny-random")
	for _, want := range []string{"general.architecture", `"llama"`, "tokenizer.ggml.tokens", "arr[str,32000]", `"<unk>", "<s>"`} {
		if !strings.Contains(out, want) {
			t.Errorf("show does not print %s:\n%s", want, out)
		}
	}
}

func TestGGUFTruncatedFileRefused(t *testing.T) {
	t.Parallel()
	p := filepath.Join(sharedTestdata(t, "bad"), "ollama-test-truncated.gguf")
	c := newCLI(t)
	c.add(writeFile(t, filepath.Join(t.TempDir(), "ok", "model.safetensors"), safetensorsFile(smallModel(3), nil)), "--name", "ok")
	before := c.snapshot()
	c.fail("invalid_archive", "add", p)
	c.requireUnchanged(before)
}

// TestGGUFSplitMergedAndResplit: a split model is one version; it checks
// out as added, merged into one file, and split again; missing or
// inconsistent shards are refused.
func TestGGUFSplitMergedAndResplit(t *testing.T) {
	t.Parallel()
	tensors := smallModel(21)
	files := ggufModel(t, tensors, gguf.PlanOptions{Name: "tiny", KVs: ggufKVs, SplitMaxTensors: 3})
	if len(files) != 3 {
		t.Fatalf("%d shards", len(files))
	}
	src := filepath.Join(t.TempDir(), "tiny")
	writeFiles(t, src, files)
	c := newCLI(t)
	res := c.add(src)
	if res.Files != 3 || res.Tensors != len(tensors) {
		t.Fatalf("add: %+v", res)
	}
	asAdded := filepath.Join(t.TempDir(), "as-added")
	c.ok("checkout", "tiny", asAdded)
	if !sameTree(readTree(t, asAdded), files) {
		t.Fatal("the split model does not come back byte for byte")
	}

	merged := filepath.Join(t.TempDir(), "merged")
	c.ok("checkout", "tiny", merged, "--split-max-tensors", "1000")
	ml, mfiles := parseCheckedOut(t, merged)
	if len(ml.Files) != 1 || ml.Files[0].Path != "tiny.gguf" || len(ml.Tensors) != len(tensors) {
		t.Fatalf("merged into %d files", len(ml.Files))
	}
	data, _ := formattest.TensorData(ml, mfiles)
	for i, tn := range tensors {
		if ml.Tensors[i].Name != tn.name || !bytes.Equal(data[i], tn.data) {
			t.Fatalf("merged tensor %d differs", i)
		}
	}
	kvs, _ := gguf.DecodeKVs([]byte(ml.Files[0].Meta[gguf.MetaKV]))
	if !bytes.Equal(gguf.EncodeKVs(kvs), gguf.EncodeKVs(ggufKVs)) {
		t.Errorf("merged key/values %s", gguf.EncodeKVs(kvs))
	}

	resplit := filepath.Join(t.TempDir(), "resplit")
	c.ok("checkout", "tiny", resplit, "--split-max-size", "300KiB", "--alignment", "64")
	rl, _ := parseCheckedOut(t, resplit)
	if len(rl.Files) < 2 {
		t.Fatalf("re-split into %d files", len(rl.Files))
	}
	// The merged file, added again, is the same tensors: only its frame is new.
	again := c.add(merged, "--name", "tiny-merged")
	if want := ml.Files[0].Extents[0].Size + c.manifestSize(again.Digest); again.NewBytes != want {
		t.Errorf("adding the merged file stored %d new bytes, want its %d-byte frame and its manifest (%d)", again.NewBytes, ml.Files[0].Extents[0].Size, want)
	}

	// Missing and inconsistent shards.
	names := make([]string, 0, 3)
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	before := c.snapshot()
	missing := filepath.Join(t.TempDir(), "missing")
	writeFiles(t, missing, map[string][]byte{names[0]: files[names[0]], names[2]: files[names[2]]})
	c.fail("schema_error", "add", missing)
	dup := filepath.Join(t.TempDir(), "dup")
	writeFiles(t, dup, map[string][]byte{names[0]: files[names[0]], names[1]: files[names[1]], names[2]: files[names[1]]})
	c.fail("schema_error", "add", dup)
	c.requireUnchanged(before)
}

// TestSafetensorsToGGUFAndBack: converting stores no new tensor bytes in
// either direction, and GGUF → SafeTensors → GGUF restores the key/values.
func TestSafetensorsToGGUFAndBack(t *testing.T) {
	t.Parallel()
	tensors := append(smallModel(31), randTensor("model.step", "I64", 5, 2), randTensor("model.bias", "BF16", 6, 64))
	c := newCLI(t)
	stDir := filepath.Join(t.TempDir(), "st")
	writeFiles(t, stDir, map[string][]byte{"model.safetensors": safetensorsFile(tensors, map[string]string{"format": "pt"}), "config.json": configJSON("float32")})
	c.add(stDir, "--name", "m")

	g1 := filepath.Join(t.TempDir(), "g1")
	c.ok("checkout", "m", g1, "--format", "gguf")
	l1, _ := parseCheckedOut(t, g1)
	if l1.Files[0].Path != "model.gguf" || len(l1.Tensors) != len(tensors) {
		t.Fatalf("GGUF checkout: %+v", l1.Files)
	}
	if _, err := os.Stat(filepath.Join(g1, "config.json")); err != nil {
		t.Errorf("config.json did not come along: %v", err)
	}
	frame := l1.Files[0].Extents[0].Size
	res := c.add(g1, "--name", "m-gguf")
	if res.Format != "gguf" || res.NewBytes != frame+c.manifestSize(res.Digest) {
		t.Errorf("the GGUF version stored %d new bytes (%d blobs), want only its %d-byte frame and its manifest", res.NewBytes, res.NewBlobs, frame)
	}
	mt, gt := c.show("m").tensorDigests(), c.show("m-gguf").tensorDigests()
	for name, d := range mt {
		if gt[name] != d {
			t.Errorf("tensor %s: %s as GGUF, %s as SafeTensors", name, gt[name], d)
		}
	}

	// GGUF → SafeTensors → GGUF gives the same file back.
	s2 := filepath.Join(t.TempDir(), "s2")
	c.ok("checkout", "m-gguf", s2, "--format", "safetensors")
	meta := readMetadata(t, filepath.Join(s2, "model.safetensors"))
	if meta["format"] != "pt" || meta[gguf.MetaKV] == "" {
		t.Errorf("__metadata__ %v", meta)
	}
	if r := c.add(s2, "--name", "m-st2"); r.NewBytes-c.manifestSize(r.Digest) <= 0 || r.NewBytes-c.manifestSize(r.Digest) > 4096 {
		t.Errorf("the SafeTensors round trip stored %d new bytes: more than its header", r.NewBytes)
	}
	g3 := filepath.Join(t.TempDir(), "g3")
	c.ok("checkout", "m-st2", g3, "--format", "gguf")
	if !sameTree(readTree(t, g3), readTree(t, g1)) {
		t.Error("GGUF → SafeTensors → GGUF does not give the same files back")
	}
}

// TestGGUFDedupWithSafetensors: the GGUF version of a model stored as
// SafeTensors, written by another tool with its own key/values, grows the
// store by its frame only.
func TestGGUFDedupWithSafetensors(t *testing.T) {
	t.Parallel()
	tensors := smallModel(41)
	c := newCLI(t)
	c.add(writeFile(t, filepath.Join(t.TempDir(), "st", "model.safetensors"), safetensorsFile(tensors, nil)), "--name", "base")
	files := ggufModel(t, tensors, gguf.PlanOptions{Name: "model-bf16", KVs: ggufKVs})
	dir := filepath.Join(t.TempDir(), "gguf")
	writeFiles(t, dir, files)
	before := c.du()
	res := c.add(dir, "--name", "base-gguf")
	after := c.du()
	l, err := gguf.Codec.Parse(formattest.NewMemDir(files), []string{"model-bf16.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	frame := l.Files[0].Extents[0].Size + c.manifestSize(res.Digest)
	if res.NewBytes != frame || after.BlobBytes-before.BlobBytes != frame {
		t.Errorf("adding the GGUF stored %d new bytes (du +%d), want its frame and its manifest, %d bytes", res.NewBytes, after.BlobBytes-before.BlobBytes, frame)
	}
}

// bf16 is the BF16 encoding of f (truncated; the values used are exact).
func bf16(f float32) []byte {
	return binary.LittleEndian.AppendUint16(nil, uint16(math.Float32bits(f)>>16))
}

// TestFP16OverflowRefused: BF16 values beyond ±65504 do not silently become
// infinite in an F16 checkout.
func TestFP16OverflowRefused(t *testing.T) {
	t.Parallel()
	w := tensor{name: "w", dtype: "BF16", shape: []int64{4}, data: bytes.Join([][]byte{bf16(1), bf16(-2), bf16(100000), bf16(0.5)}, nil)}
	c := newCLI(t)
	c.add(writeFile(t, filepath.Join(t.TempDir(), "m", "model.safetensors"), safetensorsFile([]tensor{w}, nil)), "--name", "m")
	parent := t.TempDir()
	dest := filepath.Join(parent, "f16")
	msg := c.fail("lossy_conversion", "checkout", "m", dest, "--format", "gguf", "--dtype", "f16")
	if !strings.Contains(msg, `"w"`) || !strings.Contains(msg, "--clamp") {
		t.Errorf("message does not name the tensor and --clamp: %s", msg)
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Fatalf("a refused conversion left %v", left)
	}
	c.ok("checkout", "m", dest, "--format", "gguf", "--dtype", "f16", "--clamp")
	l, files := parseCheckedOut(t, dest)
	data, _ := formattest.TensorData(l, files)
	if l.Tensors[0].DType != "F16" || !bytes.Equal(data[0], []byte{0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b, 0x00, 0x38}) {
		t.Errorf("clamped tensor %s % x", l.Tensors[0].DType, data[0])
	}
	c.fail("schema_error", "checkout", "m", filepath.Join(parent, "x"), "--format", "gguf", "--dtype", "int3")
}

func TestGGUFQuantizedToSafetensorsRefused(t *testing.T) {
	t.Parallel()
	q := tensor{name: "blk.0.attn_q.weight", dtype: "Q4_K", shape: []int64{2, 256}, data: randBytes(1, 2*144)}
	n := randTensor("blk.0.attn_norm.weight", "F32", 2, 256)
	dir := filepath.Join(t.TempDir(), "q")
	writeFiles(t, dir, ggufModel(t, []tensor{q, n}, gguf.PlanOptions{Name: "q4"}))
	c := newCLI(t)
	c.add(dir, "--name", "q4")
	msg := c.fail("lossy_conversion", "checkout", "q4", filepath.Join(t.TempDir(), "st"), "--format", "safetensors")
	if !strings.Contains(msg, "blk.0.attn_q.weight (Q4_K)") {
		t.Errorf("message does not name the quantized tensor: %s", msg)
	}
	c.ok("checkout", "q4", filepath.Join(t.TempDir(), "norm"), "--format", "safetensors", "--tensors", "*norm*")
}

// TestGGUFDiff: changed weights under an unchanged tokenizer are visible,
// and so are key/value changes.
func TestGGUFDiff(t *testing.T) {
	t.Parallel()
	tensors := smallModel(51)
	tuned := append([]tensor{}, tensors...)
	tuned[1] = randTensor(tuned[1].name, tuned[1].dtype, 777, tuned[1].shape...)
	renamed := append([]gguf.KV{}, ggufKVs...)
	renamed[1] = gguf.KV{Key: "general.name", Value: gguf.StringValue("e2e-ft")}
	c := newCLI(t)
	for name, files := range map[string]map[string][]byte{
		"base": ggufModel(t, tensors, gguf.PlanOptions{KVs: ggufKVs}),
		"ft":   ggufModel(t, tuned, gguf.PlanOptions{KVs: ggufKVs}),
		"ren":  ggufModel(t, tuned, gguf.PlanOptions{KVs: renamed}),
	} {
		dir := filepath.Join(t.TempDir(), name)
		writeFiles(t, dir, files)
		c.add(dir, "--name", name)
	}
	out := c.ok("diff", "base", "ft")
	for _, want := range []string{"~ tensor " + tuned[1].name, "key/values: 0 added, 0 removed, 0 changed", "the tokenizer key/values are unchanged"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff base ft lacks %q:\n%s", want, out)
		}
	}
	var d struct {
		Details struct {
			KV []struct {
				Key, Change, From, To string
			} `json:"kv"`
			TokenizerChanged bool `json:"tokenizer_changed"`
		} `json:"details"`
	}
	c.json(&d, "diff", "ft", "ren")
	if len(d.Details.KV) != 1 || d.Details.KV[0].Key != "general.name" || d.Details.KV[0].Change != "changed" || !strings.Contains(d.Details.KV[0].To, "e2e-ft") {
		t.Errorf("diff ft ren: %+v", d.Details)
	}
}

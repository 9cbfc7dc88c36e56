package restorer

import (
	"bytes"
	"context"
	"encoding/binary"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/gguf"
	"github.com/mstore/mstore/internal/formats/safetensors"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

// ggufTestKVs are the key/values of the generated GGUF models.
var ggufTestKVs = []gguf.KV{
	{Key: "general.architecture", Value: gguf.StringValue("llama")},
	{Key: "general.file_type", Value: gguf.Uint32Value(0)},
	{Key: "tokenizer.ggml.tokens", Value: gguf.StringArray([]string{"<unk>", "<s>", "</s>", "\xe2\x96\x81a"})},
	{Key: "tokenizer.ggml.scores", Value: gguf.ArrayValue(gguf.TypeFloat32, []uint64{0, 0x7fc00001, 0xff800000, 0x80000000})},
	{Key: "tokenizer.chat_template", Value: gguf.StringValue("{% for m in messages %}{{ m.content }}\n{% endfor %}")},
}

// ggufTensors builds tensors of the given dtypes with bytes from fill.
func ggufTensors(t *testing.T, dtypes ...string) ([]formats.Tensor, [][]byte) {
	t.Helper()
	var tensors []formats.Tensor
	var data [][]byte
	for i, dt := range dtypes {
		blk, _, _ := gguf.BlockSize(dt)
		shape := []int64{3, 2 * blk}
		size, err := gguf.TensorSize(dt, shape)
		if err != nil {
			t.Fatal(err)
		}
		name := "blk." + string(rune('a'+i)) + ".weight"
		tensors = append(tensors, formats.Tensor{Name: name, DType: dt, Shape: shape, Size: size})
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(j*7 + i*31)
		}
		data = append(data, b)
	}
	return tensors, data
}

// addFiles writes files into a fresh directory, adds it to st as name and
// returns the version.
func addFiles(t *testing.T, st *store.Store, name string, files map[string][]byte) objects.Digest {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := testmodel.Write(dir, files); err != nil {
		t.Fatal(err)
	}
	res, err := archiver.Add(context.Background(), st, dir, archiver.Options{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return res.Digest
}

func newStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "store"), true, store.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// parseGGUFDir parses every GGUF file checked out in dir.
func parseGGUFDir(t *testing.T, dir string) (*formats.Layout, map[string][]byte) {
	t.Helper()
	files := readTree(t, dir)
	l, err := gguf.Codec.Parse(formattest.NewMemDir(files), formattest.ClaimedPaths(gguf.Codec, files))
	if err != nil {
		t.Fatal(err)
	}
	checkIndependently(t, dir, l)
	return l, files
}

func checkout(t *testing.T, st *store.Store, d objects.Digest, opts Options) string {
	t.Helper()
	dest := filepath.Join(t.TempDir(), "out")
	if _, err := Checkout(context.Background(), st, d, dest, opts); err != nil {
		t.Fatal(err)
	}
	return dest
}

func kvsOf(t *testing.T, f formats.File) []gguf.KV {
	t.Helper()
	kvs, err := gguf.DecodeKVs([]byte(f.Meta[gguf.MetaKV]))
	if err != nil {
		t.Fatal(err)
	}
	return kvs
}

func TestGGUFSplitMergeAndResplit(t *testing.T) {
	tensors, data := ggufTensors(t, "F32", "Q4_K", "F16", "IQ2_XXS", "BF16")
	l, err := gguf.Plan(tensors, gguf.PlanOptions{Name: "tiny", KVs: ggufTestKVs, SplitMaxTensors: 2})
	if err != nil {
		t.Fatal(err)
	}
	files, err := formattest.Materialize(l, data)
	if err != nil {
		t.Fatal(err)
	}
	st := newStore(t)
	d := addFiles(t, st, "tiny", files)

	// As added: byte for byte.
	if got := readTree(t, checkout(t, st, d, Options{})); len(got) != 3 || !bytes.Equal(got["tiny-00002-of-00003.gguf"], files["tiny-00002-of-00003.gguf"]) {
		t.Fatalf("checkout as added: %d files", len(got))
	}
	// Merged: any re-layout without a split option writes one file.
	merged, _ := parseGGUFDir(t, checkout(t, st, d, Options{WriteOptions: formats.WriteOptions{Alignment: 32}}))
	if len(merged.Files) != 1 || merged.Files[0].Path != "tiny.gguf" || len(merged.Tensors) != 5 {
		t.Fatalf("merged: %+v", merged.Files)
	}
	if got := kvsOf(t, merged.Files[0]); !sameKVs(got, ggufTestKVs) {
		t.Errorf("merged key/values %v", got)
	}
	// Split again by size, with another alignment.
	resplit, rfiles := parseGGUFDir(t, checkout(t, st, d, Options{WriteOptions: formats.WriteOptions{SplitMaxSize: 300, Alignment: 256}}))
	if len(resplit.Files) < 2 || resplit.Files[0].Meta[gguf.MetaAlignment] != "256" || resplit.Files[1].Meta[gguf.MetaAlignment] != "256" {
		t.Fatalf("re-split: %d files", len(resplit.Files))
	}
	got, err := formattest.TensorData(resplit, rfiles)
	if err != nil {
		t.Fatal(err)
	}
	for i := range tensors {
		if !bytes.Equal(got[i], data[i]) || resplit.Tensors[i].Name != tensors[i].Name {
			t.Errorf("tensor %d differs after re-split", i)
		}
	}
	// Only some tensors.
	sub, _ := parseGGUFDir(t, checkout(t, st, d, Options{WriteOptions: formats.WriteOptions{Tensors: []string{"blk.[ab].*"}}}))
	if len(sub.Tensors) != 2 {
		t.Fatalf("subset: %d tensors", len(sub.Tensors))
	}
}

func sameKVs(a, b []gguf.KV) bool {
	return bytes.Equal(gguf.EncodeKVs(a), gguf.EncodeKVs(b))
}

func TestGGUFToSafetensorsAndBack(t *testing.T) {
	tensors, data := ggufTensors(t, "F32", "F16", "BF16", "I32", "F64")
	kvs := append(append([]gguf.KV{}, ggufTestKVs...), gguf.KV{Key: gguf.KeyAlignment, Value: gguf.Uint32Value(64)})
	l, err := gguf.Plan(tensors, gguf.PlanOptions{Name: "m", KVs: kvs, Version: 2})
	if err != nil {
		t.Fatal(err)
	}
	files, _ := formattest.Materialize(l, data)
	st := newStore(t)
	d := addFiles(t, st, "m", files)

	stDir := checkout(t, st, d, Options{Format: "safetensors"})
	stFiles := readTree(t, stDir)
	sl, err := safetensors.Codec.Parse(formattest.NewMemDir(stFiles), []string{"m.safetensors"})
	if err != nil {
		t.Fatal(err)
	}
	if sl.Files[0].Meta[gguf.MetaKV] == "" || sl.Tensors[0].Name != tensors[0].Name || !slices.Equal(sl.Tensors[0].Shape, tensors[0].Shape) {
		t.Fatalf("SafeTensors checkout: %+v", sl)
	}
	// Added again as SafeTensors, then checked out as GGUF: the same file.
	d2 := addFiles(t, st, "m-st", stFiles)
	back := readTree(t, checkout(t, st, d2, Options{Format: "gguf"}))
	if !bytes.Equal(back["m.gguf"], files["m.gguf"]) {
		t.Fatalf("GGUF → SafeTensors → GGUF changed the file (%d → %d bytes)", len(files["m.gguf"]), len(back["m.gguf"]))
	}
}

func TestQuantizedToSafetensorsIsLossy(t *testing.T) {
	tensors, data := ggufTensors(t, "F32", "Q8_0", "TQ1_0")
	l, _ := gguf.Plan(tensors, gguf.PlanOptions{})
	files, _ := formattest.Materialize(l, data)
	st := newStore(t)
	d := addFiles(t, st, "q", files)
	_, err := Checkout(context.Background(), st, d, filepath.Join(t.TempDir(), "out"), Options{Format: "safetensors"})
	if errs.ClassOf(err) != errs.LossyConversion || !strings.Contains(err.Error(), "blk.b.weight (Q8_0)") || !strings.Contains(err.Error(), "blk.c.weight (TQ1_0)") {
		t.Fatalf("err = %v, want lossy_conversion naming the quantized tensors", err)
	}
	// The unquantized ones alone convert.
	checkout(t, st, d, Options{Format: "safetensors", WriteOptions: formats.WriteOptions{Tensors: []string{"blk.a.*"}}})
}

func TestSafetensorsToGGUF(t *testing.T) {
	spec := testmodel.Spec{Layers: 1, Hidden: 16, Vocab: 64, MaxShardSize: 3000, DType: "BF16", Seed: 3}
	st, dir, d := added(t, spec)
	out, files := parseGGUFDir(t, checkout(t, st, d, Options{Format: "gguf", WriteOptions: formats.WriteOptions{Alignment: 64}}))
	if len(out.Files) != 1 || out.Files[0].Path != "model.gguf" {
		t.Fatalf("files %+v", out.Files)
	}
	kvs := kvsOf(t, out.Files[0])
	if len(kvs) != 2 || kvs[0].Key != "safetensors.metadata.format" || kvs[0].Value.Strs[0] != "pt" || kvs[1].Key != "general.alignment" {
		t.Errorf("key/values %s", gguf.EncodeKVs(kvs))
	}
	// Same tensors, same bytes, shapes kept (dims reversed in the file).
	src := readTree(t, dir)
	sl, err := safetensors.Codec.Parse(formattest.NewMemDir(src), formattest.ClaimedPaths(safetensors.Codec, src))
	if err != nil {
		t.Fatal(err)
	}
	srcData, _ := formattest.TensorData(sl, src)
	if err := formattest.SameTensors(sl, srcData, out, files); err != nil {
		t.Fatal(err)
	}

	// BF16 → F16: random bits hold values beyond ±65504.
	_, err = Checkout(context.Background(), st, d, filepath.Join(t.TempDir(), "f16"), Options{Format: "gguf", WriteOptions: formats.WriteOptions{DType: "f16"}})
	if errs.ClassOf(err) != errs.LossyConversion || !strings.Contains(err.Error(), "--clamp") {
		t.Fatalf("err = %v, want lossy_conversion", err)
	}
	f16, _ := parseGGUFDir(t, checkout(t, st, d, Options{Format: "gguf", WriteOptions: formats.WriteOptions{DType: "f16", Clamp: true}}))
	for _, tn := range f16.Tensors {
		if tn.DType != "F16" {
			t.Fatalf("%s is %s", tn.Name, tn.DType)
		}
	}
	// BF16 → F32 is exact, and SafeTensors output takes --dtype too.
	checkout(t, st, d, Options{Format: "safetensors", WriteOptions: formats.WriteOptions{DType: "f32"}})
}

func TestSafetensorsWithoutGGUFTypes(t *testing.T) {
	tensors := []formats.Tensor{
		{Name: "ok", DType: "F32", Shape: []int64{2}, Size: 8},
		{Name: "mask", DType: "BOOL", Shape: []int64{3}, Size: 3},
		{Name: "ids", DType: "U16", Shape: []int64{1}, Size: 2},
	}
	l, err := safetensors.Plan(tensors, safetensors.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	files, _ := formattest.Materialize(l, [][]byte{make([]byte, 8), {1, 0, 1}, {1, 2}})
	st := newStore(t)
	d := addFiles(t, st, "odd", files)
	_, err = Checkout(context.Background(), st, d, filepath.Join(t.TempDir(), "out"), Options{Format: "gguf"})
	if errs.ClassOf(err) != errs.UnsupportedVersion || !strings.Contains(err.Error(), "mask (BOOL)") || !strings.Contains(err.Error(), "ids (U16)") {
		t.Fatalf("err = %v, want unsupported_version naming BOOL and U16", err)
	}
	checkout(t, st, d, Options{Format: "gguf", WriteOptions: formats.WriteOptions{Tensors: []string{"ok"}}})
}

var _ = binary.LittleEndian

// A version of two GGUF models, one of them a vocabulary without tensors:
// a re-layout writes both; SafeTensors cannot keep their key/values apart.
func TestTwoGGUFModels(t *testing.T) {
	tensors, data := ggufTensors(t, "F32", "F16")
	l, _ := gguf.Plan(tensors, gguf.PlanOptions{Name: "model", KVs: ggufTestKVs[:1]})
	files, _ := formattest.Materialize(l, data)
	vocab, _ := gguf.Plan(nil, gguf.PlanOptions{Name: "vocab", KVs: ggufTestKVs[2:4]})
	vfiles, _ := formattest.Materialize(vocab, nil)
	files["vocab.gguf"] = vfiles["vocab.gguf"]
	st := newStore(t)
	d := addFiles(t, st, "two", files)

	out, _ := parseGGUFDir(t, checkout(t, st, d, Options{WriteOptions: formats.WriteOptions{Alignment: 64}}))
	if len(out.Files) != 2 || out.Files[1].Path != "vocab.gguf" || !sameKVs(kvsOf(t, out.Files[1])[:2], ggufTestKVs[2:4]) {
		t.Fatalf("re-layout: %+v", out.Files)
	}
	_, err := Checkout(context.Background(), st, d, filepath.Join(t.TempDir(), "st"), Options{Format: "safetensors"})
	if errs.ClassOf(err) != errs.LossyConversion {
		t.Fatalf("err = %v, want lossy_conversion", err)
	}
	checkout(t, st, d, Options{Format: "safetensors", WriteOptions: formats.WriteOptions{Tensors: []string{"blk.*"}}})
}

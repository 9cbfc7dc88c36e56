package gguf

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/objects"
)

// bigKVs is a tokenizer large enough that its arrays (and a long chat
// template) are frames of their own, among small key/values.
func bigKVs(tokens int) []KV {
	strs := make([]string, tokens)
	scores := make([]uint64, tokens)
	for i := range strs {
		strs[i] = fmt.Sprintf("tok%d", i)
		scores[i] = uint64(0x3f800000 + i)
	}
	return []KV{
		{Key: "general.architecture", Value: StringValue("llama")},
		{Key: "tokenizer.ggml.tokens", Value: StringArray(strs)},
		{Key: "tokenizer.ggml.scores", Value: ArrayValue(TypeFloat32, scores)},
		{Key: "tokenizer.ggml.bos_token_id", Value: Uint32Value(1)},
		{Key: "tokenizer.chat_template", Value: StringValue(strings.Repeat("{{ x }}", 1000))},
		{Key: "tokenizer.ggml.eos_token_id", Value: Uint32Value(2)},
	}
}

// manifestFile is f as a manifest keeps it (StoredMeta, frame digests), and
// a Frames callback that serves its frames from the file's bytes.
func manifestFile(t *testing.T, f formats.File, b []byte) (objects.File, func(string, int64) ([][]byte, error)) {
	t.Helper()
	mf := objects.File{Path: f.Path, Size: f.Size, Role: objects.RoleContainer, Meta: f.StoredMeta}
	frames := make([][]byte, len(f.Extents))
	for i, e := range f.Extents {
		me := objects.Extent{Size: e.Size}
		switch e.Kind {
		case formats.Frame:
			frames[i] = b[e.Offset : e.Offset+e.Size]
			me.Kind, me.Data = objects.ExtentFrame, &objects.Data{Digest: objects.Sum(frames[i])}
		case formats.TensorData:
			me.Kind, me.Tensor = objects.ExtentTensor, e.Tensor
		default:
			me.Kind = objects.ExtentZeros
		}
		mf.Extents = append(mf.Extents, me)
	}
	return mf, func(string, int64) ([][]byte, error) { return frames, nil }
}

func TestKVFramesCutParseAndPlanAlike(t *testing.T) {
	kvs := bigKVs(3000)
	specs := mixedSpecs[:3]
	files := generate(t, specs, PlanOptions{KVs: kvs})
	l, err := parseFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	if err := formattest.CheckLayout(l, files); err != nil {
		t.Fatal(err)
	}
	f, b := l.Files[0], files[l.Files[0].Path]
	own := map[string]bool{}
	for _, e := range f.Extents {
		if e.Kind != formats.Frame || e.Size < KVFrameMin {
			continue
		}
		if kv, err := parseKVFrame(b[e.Offset:e.Offset+e.Size], f.Path); err == nil {
			own[kv.Key] = true
		}
	}
	for _, k := range []string{"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.chat_template"} {
		if !own[k] {
			t.Errorf("%s is not a frame of its own: %+v", k, f.Extents)
		}
	}
	if len(own) != 3 {
		t.Errorf("frames of their own: %v, want the three large key/values", own)
	}

	// Plan cuts its header as Parse does: checkout's verification compares
	// the extents one by one.
	tensors := make([]formats.Tensor, len(l.Tensors))
	copy(tensors, l.Tensors)
	planned, err := Plan(tensors, PlanOptions{KVs: kvs})
	if err != nil {
		t.Fatal(err)
	}
	pe := planned.Files[0].Extents
	if len(pe) != len(f.Extents) {
		t.Fatalf("planned %d extents, parsed %d", len(pe), len(f.Extents))
	}
	for i, e := range f.Extents {
		if pe[i].Kind != e.Kind || pe[i].Offset != e.Offset || pe[i].Size != e.Size {
			t.Fatalf("extent %d: planned %+v, parsed %+v", i, pe[i], e)
		}
	}
}

// parsedBig generates and parses a model with kvs: its file and bytes.
func parsedBig(t *testing.T, kvs []KV) (formats.File, map[string][]byte) {
	t.Helper()
	files := generate(t, mixedSpecs[:2], PlanOptions{KVs: kvs})
	l, err := parseFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	return l.Files[0], files
}

func TestKVFramesManifestKeepsArraysByReference(t *testing.T) {
	f, files := parsedBig(t, bigKVs(3000))
	full, stored := f.Meta[MetaKV], f.StoredMeta[MetaKV]
	if len(stored) > 16<<10 || len(stored) >= len(full)/2 {
		t.Fatalf("the manifest's key/values take %d bytes of %d", len(stored), len(full))
	}
	if _, err := DecodeKVs([]byte(stored)); errs.ClassOf(err) != errs.SchemaError {
		t.Fatalf("DecodeKVs of references: %v, want schema_error (only a manifest reader resolves them)", err)
	}
	mf, frames := manifestFile(t, f, files[f.Path])
	shown, refs, err := manifestKVs(mf)
	if err != nil || len(refs) != 2 {
		t.Fatalf("%d references (%v), want the two arrays", len(refs), err)
	}
	for i := range refs {
		if v := shown[i].Value; v.Len() != 3000 || len(v.Strs)+len(v.Raw)/4 != ggufFirstElems {
			t.Errorf("%s: shown as %d elements with %d kept", shown[i].Key, v.Len(), len(v.Strs)+len(v.Raw)/4)
		}
	}
	got, err := resolvedKVs(mf, frames)
	if err != nil {
		t.Fatal(err)
	}
	if string(EncodeKVs(got)) != full {
		t.Fatal("the key/values read back from the frames are not the file's")
	}

	// A frame that is not the key/value, a missing frame, no frames at all.
	ref := -1
	for _, r := range refs {
		ref = r.extent
	}
	swapped := func(string, int64) ([][]byte, error) {
		bs, _ := frames("", 0)
		out := append([][]byte{}, bs...)
		for _, r := range refs {
			if r.extent != ref {
				out[ref] = bs[r.extent]
			}
		}
		return out, nil
	}
	truncated := func(string, int64) ([][]byte, error) {
		bs, _ := frames("", 0)
		out := append([][]byte{}, bs...)
		out[ref] = out[ref][:len(out[ref])-1]
		return out, nil
	}
	for name, c := range map[string]struct {
		frames func(string, int64) ([][]byte, error)
		class  errs.Class
	}{"another key/value": {swapped, errs.IntegrityError}, "truncated": {truncated, errs.IntegrityError}, "no frames": {nil, errs.UnsupportedVersion}} {
		if _, err := resolvedKVs(mf, c.frames); errs.ClassOf(err) != c.class {
			t.Errorf("%s: %v, want %s", name, err, c.class)
		}
	}
	bad := mf
	bad.Extents = mf.Extents[:1]
	if _, _, err := manifestKVs(bad); errs.ClassOf(err) != errs.SchemaError {
		t.Errorf("a reference past the extents: %v, want schema_error", err)
	}
}

// A version added before key/values had frames of their own holds them
// inline; diff compares it with one that keeps them by reference by the
// bytes of the key/value, not by how the manifest holds it.
func TestKVFramesDiffAcrossManifestForms(t *testing.T) {
	f, files := parsedBig(t, bigKVs(3000))
	mf, _ := manifestFile(t, f, files[f.Path])
	old := mf
	old.Meta = f.Meta // the inline form
	changed := bigKVs(3000)
	changed[1].Value.Strs[2999] = "other"
	f2, files2 := parsedBig(t, changed)
	mf2, _ := manifestFile(t, f2, files2[f2.Path])
	for name, c := range map[string]struct {
		a, b      objects.File
		unchanged bool
	}{
		"inline and by reference": {old, mf, true},
		"both by reference":       {mf, mf, true},
		"a token changed":         {mf, mf2, false},
		"inline and changed":      {old, mf2, false},
	} {
		d, err := Codec.(interface {
			Diff(a, b *objects.Manifest) (*formats.Details, error)
		}).Diff(&objects.Manifest{Files: []objects.File{c.a}}, &objects.Manifest{Files: []objects.File{c.b}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		data := d.Data.(map[string]any)
		if got := !data["tokenizer_changed"].(bool); got != c.unchanged {
			t.Errorf("%s: tokenizer unchanged %v, want %v (%v)", name, got, c.unchanged, data["kv"])
		}
	}
}

// A vocabulary file (no tensors) whose last key/value is a frame of its
// own, followed by padding that is not zeros (gguf-py writes none after
// the key/values of such a file; another writer may pad): the padding is
// a frame apart, so the key/value's frame still holds it alone.
func TestKVFramesPaddingNotJoinedToOwnFrame(t *testing.T) {
	for n := 3000; n < 3040; n++ {
		files := generate(t, nil, PlanOptions{KVs: bigKVs(n)[:2]})
		var path string
		for p := range files {
			path = p
		}
		b := files[path]
		pad := int(align(int64(len(b)), 32)) - len(b)
		if pad == 0 {
			continue // the header ends aligned: try another length
		}
		files[path] = append(b, strings.Repeat("x", pad)...)
		l, err := parseFiles(files)
		if err != nil {
			t.Fatal(err)
		}
		f := l.Files[0]
		mf, frames := manifestFile(t, f, files[path])
		if _, err := resolvedKVs(mf, frames); err != nil {
			t.Fatalf("extents %+v: %v", f.Extents, err)
		}
		return
	}
	t.Fatal("no header length left padding")
}

// FuzzParseKVFrame: a frame read back for a key/value by reference parses
// to one key/value or fails with a class, never a panic.
func FuzzParseKVFrame(f *testing.F) {
	files := generate(f, nil, PlanOptions{KVs: bigKVs(600)})
	for _, b := range files {
		l, err := parseFiles(files)
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range l.Files[0].Extents {
			f.Add(b[e.Offset : e.Offset+e.Size])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		kv, err := parseKVFrame(b, "f.gguf")
		if err != nil {
			if errs.ClassOf(err) == 0 {
				t.Fatalf("unclassified: %v", err)
			}
			return
		}
		if got := appendKV(nil, kv); string(got) != string(b) {
			t.Fatal("a key/value frame does not write back to its bytes")
		}
	})
}

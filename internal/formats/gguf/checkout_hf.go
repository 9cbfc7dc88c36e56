package gguf

import (
	"bytes"
	"path"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/cast"
	"github.com/mstore/mstore/internal/objects"
)

// hfGGUF is a GGUF checkout of an HF llama-family SafeTensors directory
// made the way llama.cpp's convert_hf_to_gguf.py makes it (hfconv_*.go):
// GGUF tensor names, q/k permuted, 1-D tensors in F32, the architecture's
// hyper-parameters and the tokenizer as key/values.
type hfGGUF struct {
	c     *ToGGUF
	plans map[string]TensorPlan
	// kept: the version came from GGUF and keeps its key/values
	// (__metadata__ gguf.kv); they are written as they were.
	kept bool
}

// maxHFFile bounds config.json and the tokenizer files read for a
// conversion (a large tokenizer.json is ~10 MiB).
const maxHFFile = 256 << 20

// hfToGGUF sets m.hf when the version is an HF directory of an
// architecture the converter handles, and leaves out of m.tensors those
// it drops. Other directories are written as before, with m.note saying
// why llama.cpp will not run them.
func hfToGGUF(req formats.PlanRequest, m *ggufModel, container string) error {
	if req.Frames == nil {
		return nil
	}
	dir := path.Dir(container)
	read := func(name string) ([]byte, error) {
		p := path.Join(dir, name)
		if f := req.Source.File(p); f == nil || f.Role != objects.RoleOther {
			return nil, nil
		}
		frames, err := req.Frames(p, maxHFFile)
		if err != nil {
			return nil, err
		}
		return bytes.Join(frames, nil), nil
	}
	var files Files
	for _, f := range []struct {
		name string
		dst  *[]byte
	}{{ConfigFile, &files.Config}, {TokenizerJSONFile, &files.TokenizerJSON},
		{TokenizerModelFile, &files.TokenizerModel}, {TokenizerConfigFile, &files.TokenizerConfig}} {
		b, err := read(f.name)
		if err != nil {
			return err
		}
		*f.dst = b
	}
	// The model directory's name: the ref's (add names a version after
	// its directory), else the folder of the container in the version.
	name := req.Options.Name
	if name == "" && dir != "." {
		name = path.Base(dir)
	}
	c, why, err := NewToGGUF(files, ModelName(files.Config, name, m.name))
	if err != nil {
		return errs.Wrap(errs.ClassOf(err), "checkout", err, "converting to GGUF for llama.cpp")
	}
	if c == nil {
		if files.Config != nil { // an HF directory llama.cpp will not run
			m.note = "the GGUF keeps the SafeTensors tensor names and has no architecture, so llama.cpp will not run it: " + why
		}
		return nil
	}
	h := &hfGGUF{c: c, plans: map[string]TensorPlan{}, kept: hasKey(m.kvs, "general.architecture")}
	var keep, skipped []objects.Tensor
	for _, t := range m.tensors {
		p, err := c.Tensor(t.Name, t.Shape)
		if err != nil {
			return errs.Wrap(errs.ClassOf(err), "checkout", err, "converting to GGUF for llama.cpp")
		}
		if p.Skip {
			skipped = append(skipped, t)
			continue
		}
		h.plans[t.Name] = p
		keep = append(keep, t)
	}
	if len(skipped) > 0 {
		m.note = "left out, as llama.cpp's converter does (llama.cpp computes them from the rope key/values): " + formats.DescribeDTypes(skipped)
	}
	m.tensors, m.hf = keep, h
	return nil
}

func hasKey(kvs []KV, key string) bool {
	for _, kv := range kvs {
		if kv.Key == key {
			return true
		}
	}
	return false
}

// apply renames, permutes and widens the planned tensors (in, after
// --dtype's casts tr, from the stored src) and gives the key/values to
// write. A tensor the converter generates (rope_freqs.weight for llama3
// rope scaling) comes first, as the converter writes it, computed from
// the empty source generated (its Transform ignores its input).
func (h *hfGGUF) apply(src []objects.Tensor, in []formats.Tensor, tr []formats.Transform, kvs []KV) ([]objects.Tensor, []formats.Tensor, []formats.Transform, []KV) {
	if tr == nil {
		tr = make([]formats.Transform, len(in))
	}
	fileType := int64(-1)
	for i, t := range src {
		p := h.plans[t.Name]
		in[i].Name = p.Name
		if p.F32 && (t.DType == "F16" || t.DType == "BF16" || t.DType == "F32") {
			// Widened from the stored bytes: exact, whatever --dtype asked.
			from := t.DType
			in[i].DType, in[i].Size, tr[i] = "F32", t.Size/int64(dtypeWidth(from))*4, nil
			if from != "F32" {
				tr[i] = func(b []byte) ([]byte, error) { return ToF32(from, b) }
			}
		}
		if p.Heads > 0 {
			tr[i] = then(tr[i], int(t.Shape[0]), p.Heads, Permute)
		}
		if len(t.Shape) >= 2 && fileType < 0 {
			if ft, ok := FileType(in[i].DType); ok {
				fileType = int64(ft)
			}
		}
	}
	if !h.kept { // kept ones had general.file_type updated by withFileType
		// The converter's key/values, then the source's __metadata__
		// entries (convertedModel) it does not set, which are kept too
		// (but for the "format" marker, as into every target).
		conv := h.c.KVs(fileType)
		for _, kv := range kvs {
			if !hasKey(conv, kv.Key) && kv.Key != stMetaPrefix+"format" {
				conv = append(conv, kv)
			}
		}
		kvs = conv
	}
	if b := h.c.RopeFreqs(); b != nil && !h.kept {
		n := int64(len(b))
		src = append([]objects.Tensor{generated(RopeFreqsTensor)}, src...)
		in = append([]formats.Tensor{{Name: RopeFreqsTensor, DType: "F32", Shape: []int64{n / 4}, Size: n}}, in...)
		tr = append([]formats.Transform{func([]byte) ([]byte, error) { return b, nil }}, tr...)
	}
	return src, in, tr, kvs
}

// generated is the source of a tensor a conversion computes rather than
// reads: no bytes, which the restorer reads (none) and verifies before
// the tensor's Transform makes its data.
func generated(name string) objects.Tensor {
	return objects.Tensor{Name: name + " (generated)", DType: "U8", Shape: []int64{0}, Digest: objects.Sum(nil)}
}

// then is prev (nil for none) followed by a row permutation of heads.
func then(prev formats.Transform, rows, heads int, permute func([]byte, int, int) ([]byte, error)) formats.Transform {
	return func(b []byte) ([]byte, error) {
		if prev != nil {
			var err error
			if b, err = prev(b); err != nil {
				return nil, err
			}
		}
		return permute(b, rows, heads)
	}
}

func dtypeWidth(d string) int {
	if d == "F32" {
		return 4
	}
	return 2
}

// keepNormsF32 undoes a --dtype cast of 1-D F32 tensors (norm weights,
// biases) in a GGUF checkout: ggml's kernels take them only in F32
// (llama.cpp aborts at the first evaluation of an F16 or BF16 norm), and
// llama.cpp's converters keep them so.
func keepNormsF32(src []objects.Tensor, in []formats.Tensor, tr []formats.Transform) ([]formats.Tensor, []formats.Transform) {
	if tr == nil {
		return in, tr
	}
	for i, t := range src {
		if len(t.Shape) <= 1 && t.DType == "F32" && tr[i] != nil {
			in[i] = formats.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Size: t.Size}
			tr[i] = nil
		}
	}
	return in, tr
}

// hfConversion is how a SafeTensors checkout of the GGUF model m becomes
// a Hugging Face directory: HF tensor names, the q/k permutation undone,
// and config.json, tokenizer_config.json and tokenizer.model or
// tokenizer.json rebuilt from the key/values (the version's own files of
// those paths are written as they are instead). The key/values stay in
// __metadata__, so that a GGUF checkout of the result gives the file
// back. A model of another architecture, or with a tensor transformers
// has no name for, converts nothing (nil).
func hfConversion(req formats.PlanRequest, m *ggufModel) (*formats.Conversion, error) {
	c, _, err := NewFromGGUF(m.kvs)
	if err != nil || c == nil {
		return nil, err
	}
	// The dtypes the target writes after its --dtype cast, for config.json's
	// torch_dtype.
	in, _, err := cast.Tensors(req.Tensors, req.Options)
	if err != nil {
		return nil, err
	}
	conv := &formats.Conversion{Names: make([]string, len(req.Tensors)), Reorders: make([]formats.Transform, len(req.Tensors))}
	tied, dtype := true, ""
	for i, t := range req.Tensors {
		p, err := c.Tensor(t.Name, t.Shape)
		if err != nil {
			return nil, nil // e.g. rope_freqs.weight: not an HF model
		}
		conv.Names[i] = p.Name
		if p.Heads > 0 {
			conv.Reorders[i] = then(nil, int(t.Shape[0]), p.Heads, Unpermute)
		}
		if t.Name == "output.weight" {
			tied = false
		}
		if len(t.Shape) >= 2 && dtype == "" {
			dtype = TorchDType(in[i].DType)
		}
	}
	if conv.Files, err = c.Files(tied, dtype); err != nil {
		return nil, errs.Wrap(errs.ClassOf(err), "checkout", err, "converting GGUF to a Hugging Face directory")
	}
	for p := range conv.Files {
		if req.Source.File(p) != nil {
			delete(conv.Files, p) // the version's own file is written as it is
		}
	}
	return conv, nil
}

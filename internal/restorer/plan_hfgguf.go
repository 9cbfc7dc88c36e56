package restorer

import (
	"bytes"
	"path"

	"github.com/mstore/mstore/formats"
	"github.com/mstore/mstore/formats/gguf"
	"github.com/mstore/mstore/formats/gguf/hfconv"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/objects"
)

// hfGGUF is a GGUF checkout of an HF llama-family SafeTensors directory
// made the way llama.cpp's convert_hf_to_gguf.py makes it (package
// hfconv): GGUF tensor names, q/k permuted, 1-D tensors in F32, the
// architecture's hyper-parameters and the tokenizer as key/values.
type hfGGUF struct {
	c     *hfconv.ToGGUF
	plans map[string]hfconv.TensorPlan
	// kept: the version came from GGUF and keeps its key/values
	// (__metadata__ gguf.kv); they are written as they were.
	kept bool
}

// maxHFFile bounds config.json and the tokenizer files read for a
// conversion (a large tokenizer.json is ~10 MiB).
const maxHFFile = 256 << 20

// hfToGGUF sets m.hf when the SafeTensors version is an HF directory of
// an architecture hfconv converts, and leaves out of m.tensors those the
// converter drops. Other directories are written as before.
func hfToGGUF(req PlanRequest, m *ggufModel, container string) error {
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
	var files hfconv.Files
	for _, f := range []struct {
		name string
		dst  *[]byte
	}{{hfconv.ConfigFile, &files.Config}, {hfconv.TokenizerJSONFile, &files.TokenizerJSON},
		{hfconv.TokenizerModelFile, &files.TokenizerModel}, {hfconv.TokenizerConfigFile, &files.TokenizerConfig}} {
		b, err := read(f.name)
		if err != nil {
			return err
		}
		*f.dst = b
	}
	c, why, err := hfconv.NewToGGUF(files, hfconv.ModelName(files.Config, m.name))
	if err != nil {
		return errs.Wrap(errs.ClassOf(err), "checkout", err, "converting to GGUF for llama.cpp")
	}
	if c == nil {
		if files.Config != nil { // an HF directory llama.cpp will not run
			m.note = "the GGUF keeps the SafeTensors tensor names and has no architecture, so llama.cpp will not run it: " + why
		}
		return nil
	}
	h := &hfGGUF{c: c, plans: map[string]hfconv.TensorPlan{}, kept: len(m.kvs) > 0 && hasKey(m.kvs, "general.architecture")}
	var keep []objects.Tensor
	for _, t := range m.tensors {
		p, err := c.Tensor(t.Name, t.Shape)
		if err != nil {
			return errs.Wrap(errs.ClassOf(err), "checkout", err, "converting to GGUF for llama.cpp")
		}
		if !p.Skip {
			h.plans[t.Name] = p
			keep = append(keep, t)
		}
	}
	m.tensors, m.hf = keep, h
	return nil
}

func hasKey(kvs []gguf.KV, key string) bool {
	for _, kv := range kvs {
		if kv.Key == key {
			return true
		}
	}
	return false
}

// apply renames, permutes and widens the planned tensors (in, after
// --dtype's casts tr) and gives the key/values to write.
func (h *hfGGUF) apply(src []objects.Tensor, in []formats.Tensor, tr []Transform, kvs []gguf.KV) ([]formats.Tensor, []Transform, []gguf.KV) {
	if tr == nil {
		tr = make([]Transform, len(in))
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
				tr[i] = func(b []byte) ([]byte, error) { return hfconv.ToF32(from, b) }
			}
		}
		if p.Heads > 0 {
			prev, rows, heads := tr[i], int(t.Shape[0]), p.Heads
			tr[i] = func(b []byte) ([]byte, error) {
				if prev != nil {
					var err error
					if b, err = prev(b); err != nil {
						return nil, err
					}
				}
				return hfconv.Permute(b, rows, heads)
			}
		}
		if len(t.Shape) >= 2 && fileType < 0 {
			if ft, ok := hfconv.FileType(in[i].DType); ok {
				fileType = int64(ft)
			}
		}
	}
	if !h.kept { // kept ones had general.file_type updated by withFileType
		kvs = h.c.KVs(fileType)
	}
	return in, tr, kvs
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
func keepNormsF32(src []objects.Tensor, in []formats.Tensor, tr []Transform) ([]formats.Tensor, []Transform) {
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

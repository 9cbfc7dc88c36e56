package restorer

import (
	"sort"

	"github.com/mstore/mstore/formats"
	"github.com/mstore/mstore/formats/gguf/hfconv"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/objects"
)

// ggufToHF makes a SafeTensors checkout of a GGUF llama-family model a
// Hugging Face directory (package hfconv): HF tensor names, q/k
// permutation undone, and config.json, tokenizer_config.json and
// tokenizer.model or tokenizer.json rebuilt from the key/values (extra,
// written beside model.safetensors). The key/values stay in __metadata__
// as before, so that a GGUF checkout of the result gives the file back.
// A model of another architecture, or with a tensor transformers has no
// name for, is written as before (extra nil).
func ggufToHF(req PlanRequest, in []formats.Tensor, tr []Transform) ([]formats.Tensor, []Transform, map[string][]byte, error) {
	models, err := ggufModels(req)
	if err != nil || len(models) != 1 {
		return in, tr, nil, err
	}
	c, _, err := hfconv.NewFromGGUF(models[0].kvs)
	if err != nil || c == nil {
		return in, tr, nil, err
	}
	plans := make([]hfconv.TensorPlan, len(in))
	tied, dtype := true, ""
	for i, t := range req.Tensors {
		p, err := c.Tensor(t.Name, t.Shape)
		if err != nil {
			return in, tr, nil, nil // e.g. rope_freqs.weight: not an HF model
		}
		plans[i] = p
		if t.Name == "output.weight" {
			tied = false
		}
		if len(t.Shape) >= 2 && dtype == "" {
			dtype = hfconv.TorchDType(in[i].DType)
		}
	}
	out := append([]formats.Tensor(nil), in...)
	outTr := make([]Transform, len(in))
	copy(outTr, tr)
	for i, p := range plans {
		out[i].Name = p.Name
		if p.Heads > 0 {
			prev, rows, heads := outTr[i], int(req.Tensors[i].Shape[0]), p.Heads
			outTr[i] = func(b []byte) ([]byte, error) {
				if prev != nil {
					var err error
					if b, err = prev(b); err != nil {
						return nil, err
					}
				}
				return hfconv.Unpermute(b, rows, heads)
			}
		}
	}
	extra, err := c.Files(tied, dtype)
	if err != nil {
		return nil, nil, nil, errs.Wrap(errs.ClassOf(err), "checkout", err, "converting GGUF to a Hugging Face directory")
	}
	for p := range extra {
		if req.Source.File(p) != nil {
			delete(extra, p) // the version's own file is written as it is
		}
	}
	return out, outTr, extra, nil
}

// extraFiles are whole files a planner adds beside its container files
// (not parsed back by the codec), each checked against its digest.
func extraFiles(extra map[string][]byte) []planFile {
	paths := make([]string, 0, len(extra))
	for p := range extra {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var out []planFile
	for _, p := range paths {
		b := extra[p]
		want := objects.Sum(b)
		out = append(out, planFile{path: p, size: int64(len(b)), want: &want, pieces: []piece{{literal: b, size: int64(len(b))}}})
	}
	return out
}

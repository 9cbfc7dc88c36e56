package safetensors

import (
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/cast"
	"github.com/mstore/mstore/internal/objects"
)

// Honours: SafeTensors files are sharded and cast; nothing else shapes
// them. What they cannot keep (an ONNX graph) is left out with
// --drop-non-tensors.
func (codec) Honours() []formats.Option {
	return []formats.Option{formats.OptMaxShardSize, formats.OptDType, formats.OptClamp, formats.OptDropNonTensors}
}

// Keeps: __metadata__ keeps a source's string key/values.
func (codec) Keeps(k formats.HeldKind) bool { return k == formats.HeldMeta }

// Extensions are stripped from an added file's name for its ref name.
func (codec) Extensions() []string { return []string{".safetensors"} }

// PlanCheckout writes the tensors as SafeTensors, sharded at
// --max-shard-size, cast by --dtype, with the source's __metadata__ (a
// SafeTensors version's own, or what another format's Export carries). A
// tensor whose dtype SafeTensors lacks (ONNX's INT4, GGUF's quantized
// types) is lossy_conversion. A source's Export.Convert (a GGUF
// llama-family model) is applied, with its files written beside.
func (codec) PlanCheckout(req formats.PlanRequest) (*formats.Planned, error) {
	var meta map[string]string
	name := ""
	if req.Source.Format == Codec.Name() {
		for _, f := range req.Source.Files {
			if f.Role == objects.RoleContainer {
				meta, name = f.Meta, baseName(f.Path)
				break
			}
		}
	} else if req.From != nil {
		meta, name = req.From.Meta, req.From.Name
	}
	var lacking []string
	for _, t := range req.Tensors {
		if _, err := TensorSize(t.DType, t.Shape); errs.ClassOf(err) == errs.UnsupportedVersion {
			lacking = append(lacking, t.Name+" ("+t.DType+")")
		}
	}
	if len(lacking) > 0 {
		if len(lacking) > 8 {
			lacking = append(lacking[:8], "…")
		}
		return nil, errs.New(errs.LossyConversion, "checkout", "SafeTensors has no dtype for %s; leave them out with --tensors", strings.Join(lacking, ", "))
	}
	in, tr, err := cast.Tensors(req.Tensors, req.Options)
	if err != nil {
		return nil, err
	}
	used := append(req.Options.Uses(formats.OptMaxShardSize), cast.Used(req.Options, tr)...)
	byChunk := cast.ByChunk(tr)
	var extra map[string][]byte
	if from := req.From; from != nil && from.Convert != nil {
		tr, extra = convert(from.Convert, in, tr), from.Convert.Files
		for i, r := range from.Convert.Reorders {
			if r != nil && byChunk != nil {
				byChunk[i] = false // a reorder needs the whole tensor
			}
		}
	}
	l, err := Plan(in, PlanOptions{MaxShardSize: req.Options.MaxShardSize, Metadata: meta, Name: name})
	if err != nil {
		return nil, err
	}
	return &formats.Planned{Layout: l, Transforms: tr, ByChunk: byChunk, Extra: extra, Used: used}, nil
}

// convert applies a source's conversion (formats.Conversion) to the
// planned tensors in, after their casts tr: the new names, then the
// reorders.
func convert(c *formats.Conversion, in []formats.Tensor, tr []formats.Transform) []formats.Transform {
	out := make([]formats.Transform, len(in))
	copy(out, tr)
	for i := range in {
		in[i].Name = c.Names[i]
		if r := c.Reorders[i]; r != nil {
			prev := out[i]
			out[i] = func(b []byte) ([]byte, error) {
				if prev != nil {
					var err error
					if b, err = prev(b); err != nil {
						return nil, err
					}
				}
				return r(b)
			}
		}
	}
	return out
}

// Export carries a SafeTensors version's name and __metadata__ into
// another format (one with metadata keeps them; Holds says what the others
// lose).
func (codec) Export(req formats.PlanRequest, _ string, _ bool) (*formats.Export, error) {
	out := &formats.Export{}
	for _, f := range req.Source.Files {
		if f.Role == objects.RoleContainer {
			out.Name, out.Meta = baseName(f.Path), f.Meta
			break
		}
	}
	return out, nil
}

// Holds: the __metadata__ of the files (but for the "format" marker, which
// only says the tensors came from PyTorch). A re-layout or conversion
// keeps the first file's: another file's that differs is lost by every
// target (HeldValues).
func (codec) Holds(m *objects.Manifest, _ func(formats.HeldKind) bool) ([]formats.Held, error) {
	var out []formats.Held
	var first map[string]string
	seen := false
	for _, f := range m.Files {
		if f.Role != objects.RoleContainer {
			continue
		}
		meta := maps.Clone(f.Meta)
		delete(meta, "format")
		keys := slices.Sorted(maps.Keys(meta))
		switch {
		case !seen:
			first, seen = meta, true
			if len(keys) > 0 {
				out = append(out, formats.Held{What: f.Path + ": __metadata__ " + strings.Join(keys, ", "), Kind: formats.HeldMeta})
			}
		case !maps.Equal(meta, first):
			out = append(out, formats.Held{What: f.Path + ": __metadata__ " + strings.Join(keys, ", ") + ", which differs from the first file's (only that one is kept)",
				Kind: formats.HeldValues})
		}
	}
	return out, nil
}

// shardSuffix matches "-00001-of-00003.safetensors".
var shardSuffix = regexp.MustCompile(`-\d{5}-of-\d{5}\.safetensors$`)

// baseName is the name a re-layout keeps: "adapters.safetensors" and
// "model-00001-of-00002.safetensors" give "adapters" and "model".
func baseName(p string) string {
	if loc := shardSuffix.FindStringIndex(p); loc != nil {
		return p[:loc[0]]
	}
	return strings.TrimSuffix(p, ".safetensors")
}

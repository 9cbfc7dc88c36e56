package pytorch

import (
	"fmt"
	"sort"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/cast"
	"github.com/mstore/mstore/internal/objects"
)

// Honours: checkpoints are sharded as transformers shards them, and cast;
// what they cannot keep (metadata, key/values, a graph, values that are
// not tensors) is left out with --drop-non-tensors.
func (codec) Honours() []formats.Option {
	return []formats.Option{formats.OptMaxShardSize, formats.OptDType, formats.OptClamp, formats.OptDropNonTensors}
}

// Extensions are stripped from an added file's name for its ref name.
func (codec) Extensions() []string { return []string{".bin", ".pt", ".pth"} }

// PlanCheckout writes the tensors as torch.save checkpoints that
// torch.load(weights_only=True) reads, each tensor in its own storage,
// sharded at --max-shard-size as transformers shards them; --dtype casts.
// A PyTorch version keeps its file name (or its shards' prefix); others
// become pytorch_model.bin.
func (codec) PlanCheckout(req formats.PlanRequest) (*formats.Planned, error) {
	if err := pytorchLoss(req); err != nil {
		return nil, err
	}
	if len(req.Tensors) == 0 { // a vocabulary-only GGUF
		return nil, errs.New(errs.SchemaError, "checkout", "the version has no tensors, and a checkpoint of none holds nothing; check it out in a format with metadata (gguf, safetensors)")
	}
	in, tr, err := cast.Tensors(req.Tensors, req.Options)
	if err != nil {
		return nil, err
	}
	l, err := Plan(in, PlanOptions{File: pytorchFile(req.Source), MaxShardSize: req.Options.MaxShardSize})
	if err != nil {
		return nil, err
	}
	return &formats.Planned{Layout: l, Transforms: tr, ByChunk: cast.ByChunk(tr), Used: append(req.Options.Uses(formats.OptMaxShardSize), cast.Used(req.Options, tr)...)}, nil
}

// pytorchLoss refuses (lossy_conversion) tensors of dtypes torch lacks
// (GGUF's quantized types). What a version holds beside its tensors is
// formats.Losses's to decide.
func pytorchLoss(req formats.PlanRequest) error {
	var lacking []objects.Tensor
	for _, t := range req.Tensors {
		if _, ok := torchName(t.DType); !ok {
			lacking = append(lacking, t)
		}
	}
	if len(lacking) > 0 {
		return errs.New(errs.LossyConversion, "checkout",
			"PyTorch has no dtype for %d tensors, they would be lost: %s (keep --format %s, or leave them out with --tensors)",
			len(lacking), formats.DescribeDTypes(lacking), req.Source.Format)
	}
	return nil
}

// pytorchFile is the checkpoint name a PyTorch version is written back
// as: its one file, or its index's name without .index.json.
func pytorchFile(m *objects.Manifest) string {
	if m.Format != Codec.Name() {
		return ""
	}
	var containers []string
	for _, f := range m.Files {
		switch f.Role {
		case objects.RoleIndex:
			return strings.TrimSuffix(f.Path, ".index.json")
		case objects.RoleContainer:
			containers = append(containers, f.Path)
		}
	}
	if len(containers) == 1 {
		return containers[0]
	}
	return ""
}

// Expand lists a PyTorch version's state-dict tensors, file by
// file, in each checkpoint's order: a Layout tensor that is its storage is
// written as stored; a view is read out of its storage (View.Gather), so
// that shared storages are resolved and strided views made contiguous.
// Values that are not tensors cannot be written by any re-layout (Holds
// lists them).
func (codec) Expand(m *objects.Manifest, _ formats.WriteOptions) ([]formats.Expanded, error) {
	byName := make(map[string]int, len(m.Tensors))
	for i, t := range m.Tensors {
		byName[t.Name] = i
	}
	bad := func(f objects.File, format string, args ...any) error {
		return errs.New(errs.IntegrityError, "checkout", "%s: checkpoint metadata: "+format, append([]any{f.Path}, args...)...)
	}
	var out []formats.Expanded
	for _, f := range m.Files {
		if f.Role != objects.RoleContainer {
			continue
		}
		fm, err := DecodeMeta(f.Meta)
		if err != nil {
			return nil, err
		}
		bare := map[string]bool{}
		for _, name := range fm.Storages {
			bare[name] = true
		}
		var owners []int
		for _, e := range f.Extents {
			if e.Kind == objects.ExtentTensor && !bare[m.Tensors[e.Tensor].Name] {
				owners = append(owners, e.Tensor)
			}
		}
		sort.Ints(owners) // Layout order
		list := make([]*formats.Expanded, len(owners)+len(fm.Views))
		for _, v := range fm.Views {
			si, ok := byName[v.Storage]
			if v.At < 0 || v.At >= len(list) || list[v.At] != nil || !ok {
				return nil, bad(f, "view %q at %d of storage %q does not fit", v.Name, v.At, v.Storage)
			}
			size, err := v.Size()
			if err != nil {
				return nil, err
			}
			st := m.Tensors[si]
			x := &formats.Expanded{Tensor: objects.Tensor{Name: v.Name, DType: v.DType, Shape: v.Shape, Size: size}}
			if v.Offset == 0 && v.Contiguous() && size == st.Size {
				x.Tensor.Digest, x.Tensor.Chunks = st.Digest, st.Chunks // the whole storage, as stored
			} else {
				view := v
				x.From, x.Read = &st, func(src []byte) ([]byte, error) { return view.Gather(src) }
			}
			list[v.At] = x
		}
		j := 0
		for _, i := range owners {
			for list[j] != nil {
				j++
			}
			list[j] = &formats.Expanded{Tensor: m.Tensors[i]}
		}
		for _, x := range list {
			out = append(out, *x)
		}
	}
	return out, nil
}

// Holds: each checkpoint's values that are not tensors (an epoch, a
// learning rate, a config object), which no re-layout writes.
func (codec) Holds(m *objects.Manifest, _ func(formats.HeldKind) bool) ([]formats.Held, error) {
	var out []formats.Held
	for _, f := range m.Files {
		if f.Role != objects.RoleContainer {
			continue
		}
		fm, err := DecodeMeta(f.Meta)
		if err != nil {
			return nil, err
		}
		if fm.Other == nil || fm.Other.Count == 0 {
			continue
		}
		names := strings.Join(fm.Other.Names, ", ")
		if fm.Other.Count > len(fm.Other.Names) {
			names += ", …"
		}
		out = append(out, formats.Held{What: fmt.Sprintf("%s: %d values that are not tensors (%s)", f.Path, fm.Other.Count, names), Kind: formats.HeldValues})
	}
	return out, nil
}

package restorer

import (
	"slices"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

// selectTensors returns the tensors of m a re-layout writes (those that
// --tensors selects), and, by name, the ones read out of another stored
// tensor.
func selectTensors(m *objects.Manifest, opts Options) ([]objects.Tensor, map[string]Expanded, error) {
	var selected []objects.Tensor
	c, _ := codecByName(m.Format)
	expand, _ := c.(formats.Expander)
	if expand == nil {
		if len(opts.Tensors) == 0 {
			return slices.Clip(m.Tensors), nil, nil // not a copy: 14 MB for 100,000 tensors
		}
		for _, t := range m.Tensors {
			if MatchAny(opts.Tensors, t.Name) {
				selected = append(selected, t)
			}
		}
		return selected, nil, nil
	}
	all, err := expand.Expand(m, opts.WriteOptions)
	if err != nil {
		return nil, nil, err
	}
	read := map[string]Expanded{}
	for _, x := range all {
		if len(opts.Tensors) == 0 || MatchAny(opts.Tensors, x.Tensor.Name) {
			selected = append(selected, x.Tensor)
			if x.From != nil {
				read[x.Tensor.Name] = x
			}
		}
	}
	return selected, read, nil
}

// resolveReads replaces, in a planner's answer, each source that is read
// out of another stored tensor by that stored tensor, and puts the read
// before the planner's own transform (a --dtype cast of a view), which
// is then no longer applied a chunk at a time (byChunk, the planner's
// Planned.ByChunk otherwise).
func resolveReads(planned *Planned, selected []objects.Tensor, read map[string]Expanded) ([]objects.Tensor, []Transform, []bool) {
	sources := planned.Sources
	if sources == nil {
		sources = selected
	}
	transforms, byChunk := planned.Transforms, planned.ByChunk
	if len(read) == 0 {
		return sources, transforms, byChunk
	}
	sources = append([]objects.Tensor(nil), sources...)
	out := make([]Transform, len(sources))
	copy(out, transforms)
	byChunk = append([]bool(nil), byChunk...)
	for i, src := range sources {
		x, ok := read[src.Name]
		if !ok || x.Tensor.Size != src.Size {
			continue
		}
		sources[i] = *x.From
		out[i] = then(x.Read, out[i])
		if i < len(byChunk) {
			byChunk[i] = false
		}
	}
	return sources, out, byChunk
}

// then is a followed by b (b may be nil).
func then(a, b Transform) Transform {
	if b == nil {
		return a
	}
	return func(src []byte) ([]byte, error) {
		mid, err := a(src)
		if err != nil {
			return nil, err
		}
		return b(mid)
	}
}

package restorer

import (
	"github.com/mstore/mstore/objects"
)

// Expanded is a tensor of a version as its users see it. Most are stored
// as they are; a format whose containers store something else (PyTorch:
// one storage shared by several tensors, strided views of a storage) says
// which stored tensor holds the bytes and how to read them out.
type Expanded struct {
	// Tensor is the tensor as users see it. When From is set, its Digest
	// and Chunks are unknown (zero) until it is written.
	Tensor objects.Tensor
	// From, when set, is the stored tensor whose bytes Read turns into
	// Tensor's.
	From *objects.Tensor
	Read Transform
}

// expanders list, by source format, the tensors a re-layout of a version
// writes, in order. Formats without one write their stored tensors. A
// format registers its own from its planner's file. Every planner then
// sees the expanded tensors as PlanRequest.Tensors, and --tensors selects
// among them.
var expanders = map[string]func(m *objects.Manifest, opts Options) ([]Expanded, error){}

// selectTensors returns the tensors of m a re-layout writes (those that
// --tensors selects), and, by name, the ones read out of another stored
// tensor.
func selectTensors(m *objects.Manifest, opts Options) ([]objects.Tensor, map[string]Expanded, error) {
	var selected []objects.Tensor
	expand := expanders[m.Format]
	if expand == nil {
		for _, t := range m.Tensors {
			if len(opts.Tensors) == 0 || MatchAny(opts.Tensors, t.Name) {
				selected = append(selected, t)
			}
		}
		return selected, nil, nil
	}
	all, err := expand(m, opts)
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
// before the planner's own transform (a --dtype cast of a view).
func resolveReads(planned *Planned, selected []objects.Tensor, read map[string]Expanded) ([]objects.Tensor, []Transform) {
	sources := planned.Sources
	if sources == nil {
		sources = selected
	}
	transforms := planned.Transforms
	if len(read) == 0 {
		return sources, transforms
	}
	sources = append([]objects.Tensor(nil), sources...)
	out := make([]Transform, len(sources))
	copy(out, transforms)
	for i, src := range sources {
		x, ok := read[src.Name]
		if !ok || x.Tensor.Size != src.Size {
			continue
		}
		sources[i] = *x.From
		out[i] = then(x.Read, out[i])
	}
	return sources, out
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

package pytorch

import (
	"slices"
	"strconv"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
)

// named is a state-dict tensor: its path in the checkpoint's object tree,
// joined with ".", and the tensor.
type named struct {
	name string
	t    *tensor
}

// walker names the tensors of the unpickled object tree: dict keys and
// list indexes joined with ".", as torch's state_dict() names them.
type walker struct {
	c      *checkpoint
	lim    Limits
	budget *formats.Budget // names are built per path: memo-shared sub-trees multiply them
	visits int
	open   map[any]bool // containers on the current path: a cycle is refused
}

// namedCost is what one named tensor costs beyond its name, which it
// holds twice (here and in the encoded Meta): its record, and its view's
// shape, stride and JSON when it is a view.
func namedCost(t *tensor) int64 { return 160 + 48*int64(len(t.shape)) }

func (c *checkpoint) name(root value, lim Limits, budget *formats.Budget) error {
	w := &walker{c: c, lim: lim, budget: budget, open: map[any]bool{}}
	return w.walk(root, "", true, false, 0)
}

func (w *walker) fail(class errs.Class, format string, args ...any) error {
	return errs.At(class, pkg, w.c.path, -1, "data.pkl: "+format, args...)
}

func join(prefix, seg string, root bool) string {
	if root {
		return seg
	}
	return prefix + "." + seg
}

// walk visits v at path name. root is true for the top-level value;
// unnamed is true below a dict key that cannot be part of a name.
func (w *walker) walk(v value, name string, root, unnamed bool, depth int) error {
	if depth > w.lim.MaxDepth {
		return w.fail(errs.SizeLimitExceeded, "values nested deeper than %d (at %q)", w.lim.MaxDepth, name)
	}
	if w.visits++; w.visits > w.lim.MaxNodes {
		return w.fail(errs.SizeLimitExceeded, "more than %d values to visit (shared sub-trees are visited once per path)", w.lim.MaxNodes)
	}
	var ident any
	var keys, vals []value
	switch x := v.(type) {
	case *tensor:
		if unnamed {
			return w.fail(errs.SchemaError, "tensor at %q is under a dict key that is neither a string nor an int, so it has no name", name)
		}
		if len(w.c.named) >= w.lim.MaxTensors {
			return w.fail(errs.SizeLimitExceeded, "more than %d tensors to name (shared sub-trees name their tensors once per path)", w.lim.MaxTensors)
		}
		if err := w.budget.Charge(2*int64(len(name)) + namedCost(x)); err != nil {
			return err
		}
		w.c.named = append(w.c.named, named{name: name, t: x})
		return nil
	case *dict:
		ident, keys, vals = x, x.keys, x.vals
	case *list:
		ident, vals = x, x.items
	case tuple:
		vals = x.items
	case *set:
		for _, item := range x.items {
			if _, ok := item.(*tensor); ok {
				return w.fail(errs.SchemaError, "a set at %q holds a tensor, which then has no name", name)
			}
		}
		w.other(name)
		return nil
	default:
		w.other(name)
		return nil
	}
	if ident != nil {
		if w.open[ident] {
			return w.fail(errs.SchemaError, "the object tree refers back to itself at %q", name)
		}
		w.open[ident] = true
		defer delete(w.open, ident)
	}
	for i, item := range vals {
		seg, ok := strconv.Itoa(i), true
		if keys != nil {
			seg, ok = keyName(keys[i])
		}
		child := join(name, seg, root)
		if err := w.budget.ChargeString(child); err != nil {
			return err
		}
		if err := w.walk(item, child, false, unnamed || !ok, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// keyName is the name segment of a dict key: a string as it is, an int in
// decimal, as str() gives them.
func keyName(k value) (string, bool) {
	switch k := k.(type) {
	case string:
		return k, true
	case int64:
		return strconv.FormatInt(k, 10), true
	case bool:
		if k {
			return "True", true
		}
		return "False", true
	}
	return "<" + typeName(k) + ">", false
}

func (w *walker) other(name string) {
	o := &w.c.other
	o.Count++
	if len(o.Names) < maxOtherNames {
		o.Names = append(o.Names, name)
	}
}

// lay decides the file's Layout tensors and Meta. A storage that is
// exactly one of the state-dict tensors (the first such, in order) is that
// tensor: its name, dtype and shape, so that its bytes and digest are the
// same as in a SafeTensors file. Any other storage is a bare storage named
// "<storage:FILE/data/KEY>", of its own dtype and element count. Layout
// tensors follow the state-dict order (a bare storage where it is first
// used); storages no tensor uses come last. The state-dict tensors that
// are not Layout tensors are views, kept in Meta.
func (c *checkpoint) lay() {
	// Each storage is placed once: grown by doubling, the tensors of a
	// checkpoint of 100,000 were 26 MB allocated for 11 MB kept.
	c.tensors = slices.Grow(c.tensors, len(c.storages))
	for i, n := range c.named {
		if st := n.t.st; st.owner < 0 && n.t.covers() {
			st.owner = i
		}
	}
	place := func(st *storage, name string, dtype string, shape []int64) {
		st.placed, st.name, st.index = true, name, len(c.tensors)
		c.tensors = append(c.tensors, formats.Tensor{Name: name, DType: dtype, Shape: append([]int64{}, shape...), Size: st.m.size})
	}
	bare := func(st *storage) {
		name := "<storage:" + c.path + "/" + st.m.record + ">"
		place(st, name, st.dtype, []int64{st.numel})
		c.meta.Storages = append(c.meta.Storages, name)
	}
	for i, n := range c.named {
		st := n.t.st
		switch {
		case st.owner == i:
			place(st, n.name, n.t.dtype, n.t.shape)
		case st.owner < 0 && !st.placed:
			bare(st)
		}
	}
	for _, st := range c.storages {
		if !st.placed {
			bare(st)
		}
	}
	for i, n := range c.named {
		if n.t.st.owner == i {
			continue
		}
		t := n.t
		c.meta.Views = append(c.meta.Views, View{Name: n.name, At: i, Storage: t.st.name, DType: t.dtype,
			Shape: append([]int64{}, t.shape...), Stride: append([]int64{}, t.stride...), Offset: t.offset})
	}
	if c.other.Count > 0 {
		o := c.other
		c.meta.Other = &o
	}
}

// file returns the checkpoint's layout file: its storages' data are tensor
// extents (indexed from base in the model's Layout.Tensors), everything
// between them is frame.
func (c *checkpoint) file(base int) formats.File {
	index := make(map[*member]int, len(c.storages))
	for _, st := range c.storages {
		index[st.m] = base + st.index
	}
	// A frame and a tensor a storage, and the last frame, sized once: grown
	// by append, the extents of 100,000 tensors took 20 MB for 16.
	f := formats.File{Path: c.path, Size: c.arc.size, Meta: c.meta.encode(), Extents: make([]formats.Extent, 0, 2*len(c.storages)+1)}
	var at int64
	for _, m := range c.arc.members {
		ti, ok := index[m]
		if !ok {
			continue
		}
		if m.data > at {
			f.Extents = append(f.Extents, formats.Extent{Kind: formats.Frame, Offset: at, Size: m.data - at})
		}
		f.Extents = append(f.Extents, formats.Extent{Kind: formats.TensorData, Offset: m.data, Size: m.size, Tensor: ti})
		at = m.data + m.size
	}
	if at < c.arc.size {
		f.Extents = append(f.Extents, formats.Extent{Kind: formats.Frame, Offset: at, Size: c.arc.size - at})
	}
	f.CRC32Checks = c.crcs
	return f
}

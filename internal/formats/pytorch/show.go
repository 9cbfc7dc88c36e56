package pytorch

import (
	"fmt"
	"sort"
	"strings"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

type pytorchFileView struct {
	Path     string   `json:"path"`
	Views    []View   `json:"views"`
	Storages []string `json:"storages"`
	Other    *Other   `json:"other,omitempty"`
}

// Describe lists, for each checkpoint whose state-dict tensors are not
// all their own storages, the views (shared or strided tensors) read out
// of the stored storages, and the values that are not tensors.
func (codec) Describe(m *objects.Manifest) (*formats.Details, error) {
	var blocks []formats.Block
	var views []pytorchFileView
	for _, f := range m.Files {
		if f.Role != objects.RoleContainer || f.Meta[MetaKey] == "" {
			continue
		}
		fm, err := DecodeMeta(f.Meta)
		if err != nil {
			return nil, err
		}
		views = append(views, pytorchFileView{Path: f.Path, Views: fm.Views, Storages: fm.Storages, Other: fm.Other})
		if len(fm.Views) > 0 {
			blocks = append(blocks, formats.Line("views of %s (state-dict tensors read out of a stored storage):", formats.V(f.Path)))
			rows := [][]formats.Value{{formats.V("TENSOR"), formats.V("DTYPE"), formats.V("SHAPE"), formats.V("STRIDE"), formats.V("OFFSET"), formats.V("STORAGE")}}
			for _, v := range fm.Views {
				rows = append(rows, []formats.Value{formats.V(v.Name), formats.V(v.DType), formats.V(shapeString(v.Shape)),
					formats.V(shapeString(v.Stride)), formats.Vf("%d", v.Offset), formats.V(v.Storage)})
			}
			blocks = append(blocks, formats.Table(0, rows...))
		}
		if fm.Other != nil {
			names := strings.Join(fm.Other.Names, ", ")
			if fm.Other.Count > len(fm.Other.Names) {
				names += ", …"
			}
			blocks = append(blocks, formats.Line("%s also holds %s values that are not tensors: %s", formats.V(f.Path), formats.Vf("%d", fm.Other.Count), formats.V(names)))
		}
	}
	if views == nil {
		return nil, nil
	}
	return &formats.Details{Blocks: blocks, Data: views}, nil
}

func shapeString(s []int64) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = fmt.Sprint(v)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// viewChange is how a view (a state-dict tensor read out of a stored
// storage) differs between two versions.
type viewChange struct {
	Name   string `json:"name"`
	Change string `json:"change"` // added, removed, changed
}

// viewKeys returns, by name, what determines each view's bytes: its
// storage's digest and how it reads it.
func viewKeys(m *objects.Manifest) (map[string]string, error) {
	digests := map[string]string{}
	for _, t := range m.Tensors {
		digests[t.Name] = t.Digest.String()
	}
	out := map[string]string{}
	for _, f := range m.Files {
		if f.Role != objects.RoleContainer {
			continue
		}
		fm, err := DecodeMeta(f.Meta)
		if err != nil {
			return nil, err
		}
		for _, v := range fm.Views {
			out[v.Name] = fmt.Sprintf("%s %s %v %v %d", digests[v.Storage], v.DType, v.Shape, v.Stride, v.Offset)
		}
	}
	return out, nil
}

// Diff lists the views that were added, removed or changed: the
// tensor-by-tensor diff sees only the stored storages.
func (codec) Diff(a, b *objects.Manifest) (*formats.Details, error) {
	ka, err := viewKeys(a)
	if err != nil {
		return nil, err
	}
	kb, err := viewKeys(b)
	if err != nil {
		return nil, err
	}
	var changes []viewChange
	for name, va := range ka {
		switch vb, ok := kb[name]; {
		case !ok:
			changes = append(changes, viewChange{name, "removed"})
		case va != vb:
			changes = append(changes, viewChange{name, "changed"})
		}
	}
	for name := range kb {
		if _, ok := ka[name]; !ok {
			changes = append(changes, viewChange{name, "added"})
		}
	}
	if len(changes) == 0 {
		return nil, nil
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Name < changes[j].Name })
	marks := map[string]string{"added": "+", "removed": "-", "changed": "~"}
	var blocks []formats.Block
	for _, c := range changes {
		blocks = append(blocks, formats.Line(marks[c.Change]+" view   %s", formats.V(c.Name)))
	}
	return &formats.Details{Blocks: blocks, Data: changes}, nil
}

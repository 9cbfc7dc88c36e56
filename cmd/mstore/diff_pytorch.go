package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/mstore/mstore/formats/pytorch"
	"github.com/mstore/mstore/objects"
	"github.com/mstore/mstore/store"
)

func init() {
	formatDiffs["pytorch"] = diffPyTorch
}

// pytorchViewChange is how a view (a state-dict tensor read out of a
// stored storage) differs between two versions.
type pytorchViewChange struct {
	Name   string `json:"name"`
	Change string `json:"change"` // added, removed, changed
}

// pytorchViewKeys returns, by name, what determines each view's bytes: its
// storage's digest and how it reads it.
func pytorchViewKeys(m *objects.Manifest) (map[string]string, error) {
	digests := map[string]string{}
	for _, t := range m.Tensors {
		digests[t.Name] = t.Digest.String()
	}
	out := map[string]string{}
	for _, f := range m.Files {
		if f.Role != objects.RoleContainer {
			continue
		}
		fm, err := pytorch.DecodeMeta(f.Meta)
		if err != nil {
			return nil, err
		}
		for _, v := range fm.Views {
			out[v.Name] = fmt.Sprintf("%s %s %v %v %d", digests[v.Storage], v.DType, v.Shape, v.Stride, v.Offset)
		}
	}
	return out, nil
}

// diffPyTorch lists the views that were added, removed or changed: the
// tensor-by-tensor diff sees only the stored storages.
func diffPyTorch(_ *store.Store, a, b *objects.Manifest) (string, any, error) {
	ka, err := pytorchViewKeys(a)
	if err != nil {
		return "", nil, err
	}
	kb, err := pytorchViewKeys(b)
	if err != nil {
		return "", nil, err
	}
	var changes []pytorchViewChange
	for name, va := range ka {
		switch vb, ok := kb[name]; {
		case !ok:
			changes = append(changes, pytorchViewChange{name, "removed"})
		case va != vb:
			changes = append(changes, pytorchViewChange{name, "changed"})
		}
	}
	for name := range kb {
		if _, ok := ka[name]; !ok {
			changes = append(changes, pytorchViewChange{name, "added"})
		}
	}
	if len(changes) == 0 {
		return "", nil, nil
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Name < changes[j].Name })
	marks := map[string]string{"added": "+", "removed": "-", "changed": "~"}
	var lines []string
	for _, c := range changes {
		lines = append(lines, fmt.Sprintf("%s view   %s", marks[c.Change], safe(c.Name)))
	}
	return strings.Join(slices.Clip(lines), "\n") + "\n", changes, nil
}

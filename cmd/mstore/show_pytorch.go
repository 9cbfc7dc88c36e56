package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/mstore/mstore/formats/pytorch"
	"github.com/mstore/mstore/objects"
	"github.com/mstore/mstore/store"
)

func init() {
	formatDetails["pytorch"] = showPyTorch
}

type pytorchFileView struct {
	Path     string         `json:"path"`
	Views    []pytorch.View `json:"views"`
	Storages []string       `json:"storages"`
	Other    *pytorch.Other `json:"other,omitempty"`
}

// showPyTorch lists, for each checkpoint whose state-dict tensors are not
// all their own storages, the views (shared or strided tensors) read out
// of the stored storages, and the values that are not tensors.
func showPyTorch(_ *store.Store, m *objects.Manifest) (string, any, error) {
	var b strings.Builder
	var views []pytorchFileView
	for _, f := range m.Files {
		if f.Role != objects.RoleContainer || f.Meta[pytorch.MetaKey] == "" {
			continue
		}
		fm, err := pytorch.DecodeMeta(f.Meta)
		if err != nil {
			return "", nil, err
		}
		views = append(views, pytorchFileView{Path: f.Path, Views: fm.Views, Storages: fm.Storages, Other: fm.Other})
		if len(fm.Views) > 0 {
			fmt.Fprintf(&b, "views of %s (state-dict tensors read out of a stored storage):\n", safe(f.Path))
			tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "TENSOR\tDTYPE\tSHAPE\tSTRIDE\tOFFSET\tSTORAGE\n")
			for _, v := range fm.Views {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", safe(v.Name), safe(v.DType), shapeString(v.Shape), shapeString(v.Stride), v.Offset, safe(v.Storage))
			}
			tw.Flush()
		}
		if fm.Other != nil {
			more := ""
			if fm.Other.Count > len(fm.Other.Names) {
				more = ", …"
			}
			fmt.Fprintf(&b, "%s also holds %d values that are not tensors: %s%s\n", safe(f.Path), fm.Other.Count, strings.Join(safeAll(fm.Other.Names), ", "), more)
		}
	}
	if views == nil {
		return "", nil, nil
	}
	return b.String(), views, nil
}

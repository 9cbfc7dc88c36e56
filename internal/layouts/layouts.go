package layouts

import (
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/layouts/hfcache"
	"github.com/mstore/mstore/internal/layouts/layout"
	"github.com/mstore/mstore/internal/layouts/oci"
	"github.com/mstore/mstore/internal/layouts/ollama"
)

// all is in add's order of detection; the layouts take disjoint paths.
var all = []layout.Layout{
	hfcache.Layout,
	ollama.Layout,
	oci.Layout,
}

// All returns every layout, in a fixed order.
func All() []layout.Layout { return all }

// ByName returns the layout `checkout --layout` names.
func ByName(name string) (layout.Layout, error) {
	for _, l := range all {
		if l.Name() == name {
			return l, nil
		}
	}
	return nil, errs.New(errs.SchemaError, "layouts", "no layout %q (this build writes: %s)", name, Names())
}

// Names lists the layouts, for help and errors.
func Names() string {
	var names []string
	for _, l := range all {
		names = append(names, l.Name())
	}
	return strings.Join(names, ", ")
}

// Detect returns the layout that takes path, or nil: then path is a plain
// model file or directory.
func Detect(path string) layout.Layout {
	for _, l := range all {
		if l.Detect(path) {
			return l
		}
	}
	return nil
}

// Package codecs is the one registry of the container formats this build
// knows: a typed list, in add's order of preference. Add finds a model's
// format here, checkout its planner, show and diff a format's details, the
// CLI the codecs' own limit flags; each through the optional interfaces of
// package formats, which the registry's test checks every codec implements
// as it claims. A new format is a folder under formats/ and one entry here.
package codecs

import (
	"strings"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/gguf"
	"github.com/mstore/mstore/internal/formats/mpk"
	"github.com/mstore/mstore/internal/formats/npz"
	"github.com/mstore/mstore/internal/formats/onnx"
	"github.com/mstore/mstore/internal/formats/pytorch"
	"github.com/mstore/mstore/internal/formats/safetensors"
)

// The order is add's preference when a model directory holds several
// formats (a Hugging Face repo with model.safetensors, pytorch_model.bin and
// an onnx/ export): the safest and most exact format wins and the others'
// files are kept as opaque files. ONNX comes before PyTorch because its
// external data files (often *.bin) are in its layout, so PyTorch's claim
// on *.bin does not count there.
var all = []formats.Codec{safetensors.Codec, gguf.Codec, onnx.Codec, pytorch.Codec, mpk.Codec, npz.Codec}

// All returns every codec, in a fixed order.
func All() []formats.Codec { return all }

// ByName returns the codec whose Name is name.
func ByName(name string) (formats.Codec, bool) {
	for _, c := range all {
		if c.Name() == name {
			return c, true
		}
	}
	return nil, false
}

// Describe names the formats add takes, for error messages.
func Describe() string {
	var names []string
	for _, c := range all {
		names = append(names, c.Name())
	}
	return "this build takes: " + strings.Join(names, ", ")
}

// Planners names the formats checkout writes.
func Planners() string {
	var names []string
	for _, c := range all {
		if _, ok := c.(formats.Planner); ok {
			names = append(names, c.Name())
		}
	}
	return strings.Join(names, ", ")
}

// Extensions are the file name endings of every codec's containers
// (formats.Named), which an add's default ref name drops.
func Extensions() []string {
	var out []string
	for _, c := range all {
		if n, ok := c.(formats.Named); ok {
			out = append(out, n.Extensions()...)
		}
	}
	return out
}

// LimitFlags are the add flags of every codec's own limits
// (formats.LimitDeclarer).
func LimitFlags() []formats.LimitFlag {
	var out []formats.LimitFlag
	for _, c := range all {
		if d, ok := c.(formats.LimitDeclarer); ok {
			out = append(out, d.LimitFlags()...)
		}
	}
	return out
}

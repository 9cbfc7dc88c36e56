// Package codecs lists the container formats this build knows, so that add
// can find a model's format and checkout can find a writer.
package codecs

import (
	"strings"

	"github.com/mstore/mstore/formats"
	"github.com/mstore/mstore/formats/gguf"
	"github.com/mstore/mstore/formats/mpk"
	"github.com/mstore/mstore/formats/onnx"
	"github.com/mstore/mstore/formats/pytorch"
	"github.com/mstore/mstore/formats/safetensors"
)

// ONNX comes first: its external data files (often *.bin, *.data) are in
// its layout, so other codecs' claims on them do not count. PyTorch, which
// claims *.bin, *.pt and *.pth, comes after it for that reason.
var all = []formats.Codec{onnx.Codec, safetensors.Codec, gguf.Codec, mpk.Codec, pytorch.Codec}

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

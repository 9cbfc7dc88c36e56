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

// The order is add's preference when a model directory holds several
// formats (a Hugging Face repo with model.safetensors, pytorch_model.bin and
// an onnx/ export): the safest and most exact format wins and the others'
// files are kept as opaque files. ONNX comes before PyTorch because its
// external data files (often *.bin) are in its layout, so PyTorch's claim
// on *.bin does not count there.
var all = []formats.Codec{safetensors.Codec, gguf.Codec, onnx.Codec, pytorch.Codec, mpk.Codec}

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

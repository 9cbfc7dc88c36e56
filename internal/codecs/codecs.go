// Package codecs lists the container formats this build knows, so that add
// can find a model's format and checkout can find a writer.
package codecs

import (
	"strings"

	"github.com/mstore/mstore/formats"
	"github.com/mstore/mstore/formats/safetensors"
)

var all = []formats.Codec{safetensors.Codec}

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

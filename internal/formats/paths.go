package formats

import (
	"strings"
	"unicode/utf8"

	"github.com/mstore/mstore/internal/objects"
)

// IsMemberPath reports whether p, a path named inside a model (an index's
// weight_map entry, an external data location, an archive member), stays in
// the model directory on every system: valid UTF-8, a clean relative slash
// path (no "..", no leading "/", no backslash), no drive or stream colon,
// and no Unicode look-alikes of slashes or of dot segments that a careless
// tool might normalise into real ones. Anything else is path_traversal.
func IsMemberPath(p string) bool {
	if !utf8.ValidString(p) || !objects.IsCleanPath(p) || strings.ContainsRune(p, ':') || strings.ContainsAny(p, confusableSlashes) {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if strings.Trim(seg, confusableDots) == "" {
			return false
		}
	}
	return true
}

const (
	confusableSlashes = "\u2044\u2215\u29f8\uff0f\u2216\u29f9\ufe68\uff3c"
	confusableDots    = ".\u2024\u2025\ufe52\uff0e"
)

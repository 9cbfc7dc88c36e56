package formats

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mstore/mstore/internal/objects"
)

// memberPathByRules is IsMemberPath as it reads in its doc, rule by rule,
// without the one-pass path for ASCII: the reference the fast path is
// held to.
func memberPathByRules(p string) bool {
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

// FuzzIsMemberPath is differential: IsMemberPath, whose ASCII paths take
// a one-pass check, answers as the rules read one by one.
func FuzzIsMemberPath(f *testing.F) {
	for _, s := range []string{
		"a", "a/b.npy", "model.layers.0.weight.npy", "", "/", "/a", "a/", "a//b", ".", "..", "...", "a/./b", "a/../b",
		"a/.../b", ".hidden", "a..b", "a\\b", "C:x", "a\x00b", "a\u2215b", "a/\u2024/b", "\xff", "a/\u00e9", "é/..", "../é",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if got, want := IsMemberPath(p), memberPathByRules(p); got != want {
			t.Fatalf("IsMemberPath(%q) = %v, the rules say %v", p, got, want)
		}
	})
}

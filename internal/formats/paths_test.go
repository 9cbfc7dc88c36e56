package formats

import "testing"

// FuzzIsMemberPath is differential: IsMemberPath, whose ASCII paths take
// a one-pass check, answers as the rules read one by one
// (memberPathByRules).
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

package main

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestSingularize(t *testing.T) {
	for in, want := range map[string]string{
		"1 files, 2 tensors":                     "1 file, 2 tensors",
		"m: 1 new blobs":                         "m: 1 new blob",
		"dropped 1 history entries, kept 3":      "dropped 1 history entry, kept 3",
		"coded 1 delta(s) again; 2 delta(s)":     "coded 1 delta again; 2 deltas",
		"11 files, 21 blobs":                     "11 files, 21 blobs",
		"v1 files":                               "v1 files",
		"1 versions, 1 blobs\nlogical    1.0 kB": "1 version, 1 blob\nlogical    1.0 kB",
		"1 gigabytes":                            "1 gigabytes",
	} {
		if got := singularize(in); got != want {
			t.Errorf("singularize(%q) = %q, want %q", in, got, want)
		}
	}
}

// mayCount never skips a line singularize would change: strings built
// from the pieces the patterns look for, in random orders, give the same
// with and without the shortcut.
func TestMayCountKeepsEveryChange(t *testing.T) {
	pieces := []string{"1 ", "11 ", "1", " ", "files", "new ", "delta(s)", "(s)", ".", "_", "x", "é", ":", "\n", "2 ", "v1 ", "tensors", "history "}
	r := rand.New(rand.NewPCG(7, 7))
	changed := 0
	for range 20_000 {
		var b strings.Builder
		for range 1 + r.IntN(8) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		s := b.String()
		want := singularizeAll(s)
		if want != s {
			changed++
		}
		if got := singularize(s); got != want {
			t.Fatalf("singularize(%q) = %q, want %q", s, got, want)
		}
	}
	if changed < 500 {
		t.Fatalf("only %d of 20,000 strings changed: the test does not reach the patterns", changed)
	}
}

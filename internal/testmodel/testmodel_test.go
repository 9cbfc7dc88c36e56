package testmodel

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The example model in the repository is exactly what Tiny builds, so the
// README's first command always runs on files mstore's own writer made.
func TestExampleIsUpToDate(t *testing.T) {
	want, err := Tiny.Build()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "..", "examples", "tiny")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(want) {
		t.Fatalf("examples/tiny has %d files, Tiny builds %d (run go run ./examples/gen)", len(entries), len(want))
	}
	for p, b := range want {
		got, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("examples/tiny/%s differs from what Tiny builds (run go run ./examples/gen)", p)
		}
	}
}

func TestBuildIsDeterministic(t *testing.T) {
	a, _ := Tiny.Build()
	b, _ := Tiny.Build()
	for p := range a {
		if !bytes.Equal(a[p], b[p]) {
			t.Fatalf("%s differs between two builds", p)
		}
	}
}

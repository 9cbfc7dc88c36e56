package layouts

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mstore/mstore/internal/errs"
)

// TestRegistry: every layout has a distinct name ByName finds; an unknown
// one is schema_error naming those there are; a plain model folder is no
// layout's.
func TestRegistry(t *testing.T) {
	seen := map[string]bool{}
	for _, l := range All() {
		if l.Name() == "" || seen[l.Name()] {
			t.Errorf("layout name %q empty or twice", l.Name())
		}
		seen[l.Name()] = true
		if got, err := ByName(l.Name()); err != nil || got != l {
			t.Errorf("ByName(%s) = %v, %v", l.Name(), got, err)
		}
	}
	if _, err := ByName("hf"); errs.ClassOf(err) != errs.SchemaError {
		t.Errorf("ByName(hf): %v, want schema_error", err)
	}
	plain := t.TempDir()
	if err := os.WriteFile(filepath.Join(plain, "model.safetensors"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if l := Detect(plain); l != nil {
		t.Errorf("a plain model folder detected as %s", l.Name())
	}
	if l := Detect(filepath.Join(plain, "model.safetensors")); l != nil {
		t.Errorf("a plain model file detected as %s", l.Name())
	}
}

package errs

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestErrorMatchesClassAndCause(t *testing.T) {
	err := Wrap(InvalidArchive, "safetensors", io.ErrUnexpectedEOF, "header truncated")
	wrapped := fmt.Errorf("add: %w", err)
	if !errors.Is(wrapped, InvalidArchive) {
		t.Fatal("class not matched through fmt.Errorf")
	}
	if !errors.Is(wrapped, io.ErrUnexpectedEOF) {
		t.Fatal("cause lost")
	}
	if errors.Is(wrapped, SchemaError) {
		t.Fatal("matched another class")
	}
	if got := ClassOf(wrapped); got != InvalidArchive {
		t.Fatalf("ClassOf = %v", got)
	}
	if !strings.Contains(wrapped.Error(), "invalid_archive") {
		t.Fatalf("message lacks class key: %q", wrapped)
	}
}

func TestKeysAndExitCodesAreDistinct(t *testing.T) {
	seenKey := map[string]bool{}
	seenCode := map[int]bool{}
	for _, c := range Classes() {
		if seenKey[c.Key()] || seenCode[c.ExitCode()] {
			t.Fatalf("duplicate key or exit code for %v", c)
		}
		seenKey[c.Key()], seenCode[c.ExitCode()] = true, true
	}
	if Class(0).ExitCode() != 1 || len(seenKey) != 10 {
		t.Fatal("zero class must be invalid; there are ten classes")
	}
}

func TestAtNamesOffset(t *testing.T) {
	err := At(SchemaError, "gguf", "m.gguf", 42, "bad key")
	if got := err.Error(); got != "gguf: schema_error: m.gguf at byte 42: bad key" {
		t.Fatalf("got %q", got)
	}
	if ClassOf(nil) != 0 || ClassOf(errors.New("x")) != 0 {
		t.Fatal("unclassified errors must have class 0")
	}
}

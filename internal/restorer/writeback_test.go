package restorer

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The streaming writer's file gets every byte, in order, and writeback is
// asked for each writebackEvery bytes as they are written, not only at
// the end (publish's syncfs then finds most of the file on disk already).
func TestWritebackWriterSendsAsItWrites(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := &writebackWriter{f: f}
	want := bytes.Repeat([]byte("0123456789abcdef"), (2*writebackEvery+12345)/16)
	for p := want; len(p) > 0; {
		n := min(len(p), 1<<20)
		if _, err := w.Write(p[:n]); err != nil {
			t.Fatal(err)
		}
		p = p[n:]
		if w.at-w.sent >= writebackEvery {
			t.Fatalf("at %d, writeback asked only up to %d", w.at, w.sent)
		}
	}
	if w.sent < 2*writebackEvery {
		t.Fatalf("writeback asked up to %d of %d bytes", w.sent, len(want))
	}
	got, err := os.ReadFile(f.Name())
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the file holds %d bytes, not the %d written (%v)", len(got), len(want), err)
	}
}

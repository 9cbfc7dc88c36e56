package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
)

// failingWriter fails every write after the first n bytes.
type failingWriter struct {
	n   int
	err error
	buf bytes.Buffer
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.n {
		k := w.n - w.buf.Len()
		w.buf.Write(p[:k])
		return k, w.err
	}
	return w.buf.Write(p)
}

func TestOutputKeepsFirstError(t *testing.T) {
	for _, cause := range []error{syscall.ENOSPC, syscall.EPIPE} {
		w := &failingWriter{n: 5, err: cause}
		out := &output{w: w}
		fmt.Fprintf(out, "abc\n")
		if out.err != nil {
			t.Fatalf("error after a write that fit: %v", out.err)
		}
		fmt.Fprintf(out, "defgh\n")
		fmt.Fprintf(out, "ij\n")
		if !errors.Is(out.err, cause) {
			t.Fatalf("kept %v, want %v", out.err, cause)
		}
		if w.buf.String() != "abc\nd" {
			t.Errorf("written %q after the failure", w.buf.String())
		}
		// A full disk under stdout is an io_error, not the store's
		// size_limit_exceeded.
		if key, code := classOf(fmt.Errorf("show: %w", out.err)); key != "io_error" || code != 1 {
			t.Errorf("classOf(%v) = %s, %d; want io_error, 1", out.err, key, code)
		}
		var msg strings.Builder
		if code := report(&msg, false, out.err); code != 1 || !strings.HasPrefix(msg.String(), "mstore: io_error: writing the output: ") {
			t.Errorf("report: %d %q", code, msg.String())
		}
	}
}

func TestOutputShortWrite(t *testing.T) {
	out := &output{w: &failingWriter{n: 2}} // a short write without an error
	if _, err := out.Write([]byte("abc")); !errors.Is(err, io.ErrShortWrite) {
		t.Errorf("short write: %v", err)
	}
}

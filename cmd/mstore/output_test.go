package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

// Stdout that is not a terminal is buffered: nothing reaches the file
// before Flush, all of it after; a write that fails at the flush (here, a
// closed file) is kept and reported as any write error is; env.result
// flushes what a script waits for.
func TestOutputBuffersUntilFlush(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := stdoutFor(f)
	size := func() int64 {
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	fmt.Fprintf(out, "line 1\n")
	if size() != 0 {
		t.Fatal("a write reached the file before Flush")
	}
	e := &env{stdout: out}
	e.result("serving on %s\n", "http://127.0.0.1:1")
	if size() != int64(len("line 1\nserving on http://127.0.0.1:1\n")) {
		t.Fatalf("after env.result the file holds %d bytes", size())
	}

	closed, err := os.Create(filepath.Join(t.TempDir(), "closed"))
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	out = stdoutFor(closed)
	fmt.Fprintf(out, "lost\n")
	if out.err != nil {
		t.Fatalf("a buffered write failed at once: %v", out.err)
	}
	if err := out.Flush(); err == nil || out.err == nil {
		t.Fatal("Flush to a closed file reported no error")
	}
	if key, _ := classOf(out.err); key != "io_error" {
		t.Errorf("a failed flush is %s, want io_error", key)
	}
}

// What a command prints inside gathered reaches its stdout in one write
// when fn returns, stdout is the command's again after it, and a failed
// write is gathered's error.
func TestGathered(t *testing.T) {
	w := &failAfter{n: 1}
	e := &env{stdout: w}
	if err := e.gathered(func() {
		for i := range 1000 {
			e.printf("line %d\n", i)
		}
	}); err != nil || w.writes != 1 {
		t.Fatalf("err %v, %d writes, want one", err, w.writes)
	}
	if e.stdout != io.Writer(w) {
		t.Fatal("stdout was not given back")
	}
	if err := e.gathered(func() { e.printf("more\n") }); err == nil {
		t.Fatal("a failed write was not reported")
	}
}

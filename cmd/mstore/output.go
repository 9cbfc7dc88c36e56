package main

import (
	"bufio"
	"io"
	"os"

	"github.com/mstore/mstore/internal/progress"
)

// output is every command's stdout. A command prints through it without
// checking each write; output keeps the first write error (a full disk,
// a closed pipe) and refuses every later write, and main reports it after
// the command, so that no command can exit 0 with its output cut short.
//
// Unless stdout is a terminal, what is printed is gathered in a buffer:
// show and diff print a line a tensor, and 100,000 write(2)s took 0.29 s of
// the 0.33 s a show of 100,000 tensors ran. Flush writes it out: main
// before it reports, env.result after a line a script waits for (serve's
// address), env.note before a remark on stderr, so that the two stay in
// order in one file.
type output struct {
	w   io.Writer
	buf *bufio.Writer // nil: every write goes straight to w
	err error         // an *outputError, once a write failed
}

// stdoutFor is the output of f, buffered unless f is a terminal.
func stdoutFor(f *os.File) *output {
	o := &output{w: f}
	if !progress.IsTerminal(f) {
		o.buf = bufio.NewWriterSize(f, 64<<10)
	}
	return o
}

func (o *output) Write(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	var n int
	var err error
	if o.buf != nil {
		n, err = o.buf.Write(p)
	} else {
		n, err = o.w.Write(p)
	}
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		o.err = &outputError{err: err}
	}
	return n, o.err
}

// Flush writes what the buffer holds, and returns the first write error.
func (o *output) Flush() error {
	if o.err == nil && o.buf != nil {
		if err := o.buf.Flush(); err != nil {
			o.err = &outputError{err: err}
		}
	}
	return o.err
}

// flushOutput flushes w if it is an output.
func flushOutput(w io.Writer) {
	if o, ok := w.(*output); ok {
		o.Flush()
	}
}

// outputError is a failed write to stdout. It is an io_error whatever its
// cause: a full disk under stdout is not the store's size limit.
type outputError struct{ err error }

func (e *outputError) Error() string {
	return "writing the output: " + e.err.Error() + " (what the command printed is incomplete)"
}

func (e *outputError) Unwrap() error { return e.err }

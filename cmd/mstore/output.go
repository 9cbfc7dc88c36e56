package main

import (
	"io"
)

// output is every command's stdout. A command prints through it without
// checking each write; output keeps the first write error (a full disk,
// a closed pipe) and refuses every later write, and main reports it after
// the command, so that no command can exit 0 with its output cut short.
type output struct {
	w   io.Writer
	err error // an *outputError, once a write failed
}

func (o *output) Write(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		o.err = &outputError{err: err}
	}
	return n, o.err
}

// outputError is a failed write to stdout. It is an io_error whatever its
// cause: a full disk under stdout is not the store's size limit.
type outputError struct{ err error }

func (e *outputError) Error() string {
	return "writing the output: " + e.err.Error() + " (what the command printed is incomplete)"
}

func (e *outputError) Unwrap() error { return e.err }

package httpremote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// errStalled is why a request is cancelled when no byte of its answer
// arrived for the stall timeout: a slow link that keeps moving is never
// cut off, a dead one is within the timeout.
var errStalled = errors.New("no byte arrived")

// stallWatch cancels a request's context once nothing has moved for d:
// not while the server is still sending, however long the answer takes.
type stallWatch struct {
	timer *time.Timer
	d     time.Duration
}

// withStall returns ctx with the watch armed, and a stop that disarms it.
func withStall(ctx context.Context, d time.Duration) (context.Context, *stallWatch, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &stallWatch{d: d, timer: time.AfterFunc(d, func() { cancel(fmt.Errorf("%w for %s", errStalled, d)) })}
	return ctx, w, func() { w.timer.Stop(); cancel(nil) }
}

// moved re-arms the watch: bytes arrived.
func (w *stallWatch) moved() { w.timer.Reset(w.d) }

// body wraps resp's body so that every read that brings bytes re-arms w.
func (w *stallWatch) body(resp *http.Response) {
	resp.Body = &movingBody{ReadCloser: resp.Body, w: w}
}

// sending wraps a request body so that every read the transport takes to
// send it re-arms w.
func (w *stallWatch) sending(r io.Reader) io.Reader { return &movingReader{r: r, w: w} }

type movingReader struct {
	r io.Reader
	w *stallWatch
}

func (m *movingReader) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if n > 0 {
		m.w.moved()
	}
	return n, err
}

type movingBody struct {
	io.ReadCloser
	w *stallWatch
}

func (b *movingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.moved()
	}
	return n, err
}

// stallCause is the watch's reason when ctx ended by it, else err.
func stallCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, errStalled) {
		return cause
	}
	return err
}

package progress

import (
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// Reporter receives the bytes processed by a long operation. Methods may be
// called from many goroutines. Start may be called again (a pull's later
// round); the totals then start over.
type Reporter interface {
	Start(total int64)
	Add(n int64)
	Finish()
}

// Mode is how progress is shown. Its zero value is invalid.
type Mode int

const (
	_ Mode = iota
	// Bar redraws one line on a terminal.
	Bar
	// JSON writes one JSON status line per update.
	JSON
)

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool { return f != nil && term.IsTerminal(int(f.Fd())) }

// ForTerminal returns a bar drawn on w when w is a terminal, else nil (no
// progress at all).
func ForTerminal(w *os.File, action string) Reporter {
	if !IsTerminal(w) {
		return nil
	}
	r := New(w, action, Bar).(*reporter)
	if cols, _, err := term.GetSize(int(w.Fd())); err == nil && cols > 0 {
		r.cols = cols
	}
	return r
}

// New returns a reporter that writes to w in mode; action names the
// operation ("add", "checkout", "pull", "push").
func New(w io.Writer, action string, mode Mode) Reporter {
	r := &reporter{w: w, action: action, now: time.Now, every: 100 * time.Millisecond}
	switch mode {
	case JSON:
		r.draw = r.drawJSON
		r.every = 500 * time.Millisecond
	default:
		r.draw = r.drawBar
	}
	return r
}

// reporter is both modes: one meter, two ways of drawing it.
type reporter struct {
	w      io.Writer
	action string
	now    func() time.Time
	every  time.Duration // least time between two draws
	cols   int           // the terminal's width, 0 when unknown

	mu       sync.Mutex
	m        meter
	started  bool
	lastDraw time.Time
	drawn    bool // a bar line is on the terminal
	draw     func(s Status, final bool)
}

func (r *reporter) Start(total int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m = newMeter(total, r.now())
	r.started = true
	r.lastDraw = r.now()
	r.draw(r.m.status(r.action, r.lastDraw), false)
}

func (r *reporter) Add(n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		return
	}
	now := r.now()
	r.m.add(n, now)
	if now.Sub(r.lastDraw) >= r.every {
		r.lastDraw = now
		r.draw(r.m.status(r.action, now), false)
	}
}

func (r *reporter) Finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		return
	}
	r.started = false
	r.draw(r.m.status(r.action, r.now()), true)
}

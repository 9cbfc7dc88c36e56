// Package progress draws byte progress bars on a terminal, and nothing
// anywhere else.
package progress

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Reporter receives the bytes processed by a long operation. Methods may be
// called from many goroutines.
type Reporter interface {
	Start(total int64)
	Add(n int64)
	Finish()
}

// ForTerminal returns a bar drawn on w when w is a terminal, else nil (no
// progress at all).
func ForTerminal(w *os.File, label string) Reporter {
	if !term.IsTerminal(int(w.Fd())) {
		return nil
	}
	return &bar{w: w, label: label}
}

type bar struct {
	w     io.Writer
	label string
	b     *progressbar.ProgressBar
}

func (b *bar) Start(total int64) {
	b.b = progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(b.w),
		progressbar.OptionSetDescription(b.label),
		progressbar.OptionShowBytes(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
}

func (b *bar) Add(n int64) {
	if b.b != nil {
		b.b.Add64(n)
	}
}

func (b *bar) Finish() {
	if b.b != nil {
		b.b.Finish()
	}
}

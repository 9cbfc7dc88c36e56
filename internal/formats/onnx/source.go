package onnx

import (
	"errors"
	"io"
	"sort"

	"github.com/mstore/mstore/internal/errs"
)

// source is the bytes of one .onnx file as the walker reads them: only
// field headers and the small fields it needs, never tensor data.
type source interface {
	// at returns up to n bytes at off (fewer at the end of the file or of
	// a run of known bytes), valid until the next call.
	at(off int64, n int) ([]byte, error)
	size() int64
}

// window reads a file through a sliding buffer, so that walking a 2 GB
// protobuf costs a few reads per skipped tensor and no more memory than
// the window and the largest small field.
type window struct {
	r      io.ReaderAt
	n      int64
	buf    []byte
	bufOff int64
}

const windowSize = 64 << 10

func newWindow(r io.ReaderAt, size int64) *window { return &window{r: r, n: size} }

func (w *window) size() int64 { return w.n }

func (w *window) at(off int64, n int) ([]byte, error) {
	if off < 0 || off > w.n {
		return nil, errs.New(errs.InvalidArchive, pkg, "read at %d outside the file (%d bytes)", off, w.n)
	}
	n = int(min(int64(n), w.n-off))
	if off >= w.bufOff && off+int64(n) <= w.bufOff+int64(len(w.buf)) {
		return w.buf[off-w.bufOff : off-w.bufOff+int64(n)], nil
	}
	want := int(min(int64(max(n, windowSize)), w.n-off))
	if cap(w.buf) < want {
		w.buf = make([]byte, want)
	}
	w.buf = w.buf[:want]
	got, err := w.r.ReadAt(w.buf, off)
	if got < want && err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if got < want {
		return nil, errs.New(errs.InvalidArchive, pkg, "file shorter than its size (%d bytes at %d)", got, off)
	}
	w.bufOff = off
	return w.buf[:n], nil
}

// run is a stretch of a stored .onnx file: its bytes, or a hole where
// tensor data was (the planner never has, nor needs, those bytes).
type run struct {
	off   int64
	size  int64
	bytes []byte // nil for a hole
}

// runs is a .onnx file rebuilt from its frames for the planner.
type runs struct {
	list []run
	n    int64
}

// newRuns joins adjacent known runs, so that no field header is split.
func newRuns(parts []run) *runs {
	r := &runs{}
	for _, p := range parts {
		r.n = p.off + p.size
		if p.size == 0 {
			continue
		}
		if k := len(r.list) - 1; k >= 0 && p.bytes != nil && r.list[k].bytes != nil {
			r.list[k].bytes = append(r.list[k].bytes[:r.list[k].size:r.list[k].size], p.bytes...)
			r.list[k].size += p.size
			continue
		}
		r.list = append(r.list, p)
	}
	return r
}

func (r *runs) size() int64 { return r.n }

func (r *runs) at(off int64, n int) ([]byte, error) {
	i := sort.Search(len(r.list), func(i int) bool { return r.list[i].off+r.list[i].size > off })
	if off == r.n {
		return nil, nil
	}
	if i == len(r.list) || r.list[i].off > off || r.list[i].bytes == nil {
		return nil, errs.New(errs.IntegrityError, pkg, "the stored frame has no bytes at %d: it does not match its tensors", off)
	}
	rel := off - r.list[i].off
	end := min(rel+int64(n), r.list[i].size)
	return r.list[i].bytes[rel:end], nil
}

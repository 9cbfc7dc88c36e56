package archiver

import (
	"errors"
	"io"
	"sync"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

// A codec's parse is a function of what its Dir answers: the size of each
// file it opens or stats, the link counts it asks for, and the bytes (and
// end of file) each read returns. readLog notes those answers during the
// first parse; once the model is stored, replay asks the stagedDir (which
// serves only bytes read again from the source and found to be the stored
// chunks) the same questions. When every answer is the same, a parse of
// the stored bytes would read what the first parse read and return its
// layout, so it is not run: what the add records is still what the codec
// approved, for the cost of hashing the bytes the parser read (a header)
// twice rather than parsing 100,000 tensor entries again.

// readLog is a formats.Dir that notes what a parse asks of dir and gets.
type readLog struct {
	dir formats.Dir

	mu     sync.Mutex
	asks   []ask
	hasher *objects.Hasher // of the last ask, a read that the next read may extend
}

type askKind uint8

const (
	askOpen askKind = iota + 1
	askStat
	askRead
	askLinks
)

// outcome is how an ask ended, as far as a parser can tell answers apart.
type outcome struct {
	eof   bool       // a read that ended at the end of the file
	class errs.Class // a failure's class; 0 with other failures
	fail  bool
}

func outcomeOf(err error) outcome {
	switch {
	case err == nil:
		return outcome{}
	case errors.Is(err, io.EOF):
		return outcome{eof: true}
	}
	return outcome{class: errs.ClassOf(err), fail: true}
}

// ask is one question and its answer. Reads of a file, each starting where
// the one before it ended and that one whole, are one ask: a header read
// as its length then its body, or a file read from its start in blocks.
type ask struct {
	kind   askKind
	path   string
	off    int64 // a read's offset
	n      int64 // the bytes asked for (a read), the size (open, stat), the count (links)
	got    int64 // the bytes a read returned
	out    outcome
	digest objects.Digest // of the bytes a read returned
}

func newReadLog(dir formats.Dir) *readLog { return &readLog{dir: dir} }

func (l *readLog) note(a ask) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seal()
	l.asks = append(l.asks, a)
}

// seal finishes the digest of the last ask; l.mu is held.
func (l *readLog) seal() {
	if l.hasher != nil {
		l.asks[len(l.asks)-1].digest = l.hasher.Digest()
		l.hasher = nil
	}
}

func (l *readLog) Stat(p string) (int64, error) {
	size, err := l.dir.Stat(p)
	l.note(ask{kind: askStat, path: p, n: size, out: outcomeOf(err)})
	return size, err
}

func (l *readLog) Open(p string) (formats.ReadAtCloser, error) {
	f, err := l.dir.Open(p)
	if err != nil {
		l.note(ask{kind: askOpen, path: p, out: outcomeOf(err)})
		return nil, err
	}
	l.note(ask{kind: askOpen, path: p, n: f.Size()})
	return &loggedFile{ReadAtCloser: f, log: l, path: p}, nil
}

// DefersCRC32: the add compares the CRC-32 runs a codec lists as it hashes
// the file (crcRuns), so the parse need not read them.
func (l *readLog) DefersCRC32() bool { return true }

// Links implements formats.LinkCounter for codecs that ask (ONNX), as the
// stagedDir does.
func (l *readLog) Links(p string) (int, error) {
	n, err := 1, error(nil)
	if lc, ok := l.dir.(formats.LinkCounter); ok {
		n, err = lc.Links(p)
	}
	l.note(ask{kind: askLinks, path: p, n: int64(n), out: outcomeOf(err)})
	return n, err
}

type loggedFile struct {
	formats.ReadAtCloser
	log  *readLog
	path string
}

func (f *loggedFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.ReadAtCloser.ReadAt(b, off)
	f.log.read(f.path, off, int64(len(b)), b[:n], readOutcome(n, len(b), err))
	return n, err
}

// readOutcome is the outcome of a read of want bytes that returned n and
// err. A read that returned every byte asked for succeeded, whatever err
// says: io.ReaderAt may report io.EOF with the last bytes, which the
// stagedDir does not.
func readOutcome(n, want int, err error) outcome {
	if n == want {
		return outcome{}
	}
	return outcomeOf(err)
}

// read notes a read of want bytes at off that returned got.
func (l *readLog) read(p string, off, want int64, got []byte, out outcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := len(l.asks) - 1; k >= 0 && l.hasher != nil {
		if last := &l.asks[k]; last.path == p && last.off+last.got == off && last.got == last.n && last.out == (outcome{}) {
			last.n += want
			last.got += int64(len(got))
			last.out = out
			l.hasher.Write(got)
			return
		}
	}
	l.seal()
	l.asks = append(l.asks, ask{kind: askRead, path: p, off: off, n: want, got: int64(len(got)), out: out})
	l.hasher = objects.NewHasher()
	l.hasher.Write(got)
}

// replay asks d what the parse asked and reports whether every answer is
// the one the parse got. A read's bytes are compared by digest.
func (l *readLog) replay(d formats.Dir) bool {
	l.mu.Lock()
	l.seal()
	asks := l.asks
	l.mu.Unlock()
	// The reads are compared a chunk at a time at most: most are a
	// header's few kilobytes, not worth a 4 MiB buffer.
	longest := int64(0)
	for _, a := range asks {
		if a.kind == askRead {
			longest = max(longest, a.n)
		}
	}
	buf := make([]byte, min(longest, objects.ChunkSize))
	open := map[string]formats.ReadAtCloser{}
	defer func() {
		for _, f := range open {
			f.Close()
		}
	}()
	for _, a := range asks {
		switch a.kind {
		case askOpen:
			f, err := d.Open(a.path)
			if outcomeOf(err) != a.out || err == nil && f.Size() != a.n {
				return false
			}
			if err == nil && open[a.path] == nil {
				open[a.path] = f
			} else if err == nil {
				f.Close()
			}
		case askStat:
			size, err := d.Stat(a.path)
			if outcomeOf(err) != a.out || err == nil && size != a.n {
				return false
			}
		case askLinks:
			lc, ok := d.(formats.LinkCounter)
			if !ok {
				return false
			}
			n, err := lc.Links(a.path)
			if outcomeOf(err) != a.out || err == nil && int64(n) != a.n {
				return false
			}
		case askRead:
			f := open[a.path]
			if f == nil || !sameRead(f, a, buf) {
				return false
			}
		}
	}
	return true
}

// sameRead reads a's range of f again, through buf, and compares.
func sameRead(f io.ReaderAt, a ask, buf []byte) bool {
	h := objects.NewHasher()
	var got int64
	var out outcome
	for got < a.n {
		k := min(a.n-got, int64(len(buf)))
		n, err := f.ReadAt(buf[:k], a.off+got)
		h.Write(buf[:n])
		got += int64(n)
		if out = readOutcome(n, int(k), err); out != (outcome{}) {
			break
		}
	}
	return got == a.got && out == a.out && h.Digest() == a.digest
}

package archiver

import (
	"fmt"
	"io"
	"io/fs"
	"sync"
	"syscall"
	"time"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/modeldir"
)

// fileState is what says a file is still the one that was parsed: a
// rewrite in place changes its size, mtime or ctime (which no one can set
// back), a file put in its place its inode or device.
type fileState struct {
	size         int64
	mtime, ctime time.Time
	ino, dev     uint64
}

func stateOf(info fs.FileInfo) fileState {
	s := fileState{size: info.Size(), mtime: info.ModTime()}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		s.ctime = time.Unix(int64(st.Ctim.Sec), int64(st.Ctim.Nsec))
		s.ino, s.dev = uint64(st.Ino), uint64(st.Dev)
	}
	return s
}

// fileStates is the state of each file of the model as first seen.
type fileStates struct {
	mu sync.Mutex
	m  map[string]fileState
}

// statAll records the state of every file of the model, before anything
// is parsed.
func statAll(dir *modeldir.Dir) (*fileStates, error) {
	out := &fileStates{m: make(map[string]fileState, len(dir.Files))}
	for _, p := range dir.Files {
		info, err := dir.Info(p)
		if err != nil {
			return nil, err
		}
		out.m[p] = stateOf(info)
	}
	return out, nil
}

func errChanged(p, how string) error {
	return errs.New(errs.IntegrityError, "add", "%s changed while it was being added (%s); add it again when nothing writes to it", p, how)
}

// check compares a file's state now with the one recorded before it was
// parsed. A file the model did not list (a single .onnx file's external
// data beside it) is recorded when it is first opened.
func (s *fileStates) check(p string, now fs.FileInfo) error {
	is := stateOf(now)
	s.mu.Lock()
	was, ok := s.m[p]
	if !ok {
		s.m[p] = is
	}
	s.mu.Unlock()
	switch {
	case !ok:
		return nil
	case is.ino != was.ino || is.dev != was.dev:
		return errChanged(p, "another file is in its place")
	case is.size != was.size:
		return errChanged(p, fmt.Sprintf("its size went from %d to %d bytes", was.size, is.size))
	case !is.mtime.Equal(was.mtime) || !is.ctime.Equal(was.ctime):
		return errChanged(p, "it was written to")
	}
	return nil
}

// checkUnchanged refuses a model whose files were modified while it was
// being added: its digests would describe no real state of the files.
func checkUnchanged(dir *modeldir.Dir, files []fileWork, before *fileStates) error {
	for _, f := range files {
		info, err := dir.Info(f.Path)
		if err != nil {
			return err
		}
		if err := before.check(f.Path, info); err != nil {
			return err
		}
	}
	return nil
}

// checkedDir is the model directory whose files, each time one is opened,
// must still be the file that was first seen (checkState).
type checkedDir struct {
	*modeldir.Dir
	before *fileStates
}

func (d checkedDir) Open(p string) (formats.ReadAtCloser, error) {
	f, err := d.Dir.Open(p)
	if err != nil {
		return nil, err
	}
	st, ok := f.(interface{ Stat() (fs.FileInfo, error) })
	if !ok {
		f.Close()
		return nil, fmt.Errorf("add: %s: cannot stat an open file", p)
	}
	info, err := st.Stat()
	if err == nil {
		err = d.before.check(p, info)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// maxIdleFiles bounds the files a readerPool keeps open between reads: a
// model of 50,000 files must not need 50,000 descriptors.
const maxIdleFiles = 16

// readerPool opens the model's files for the workers when they need them
// and closes them after (ReadAt is safe for concurrent use, so a file in
// use by several workers is opened once). A few idle files stay open, so
// that the chunks of one large file do not each open it. Decoded streams
// (spooled to a temp file once) stay open until the add ends.
type readerPool struct {
	dir checkedDir
	// decoded opens the files whose extents describe a decoded stream.
	decoded map[string]func() (formats.ReadAtCloser, error)

	mu   sync.Mutex
	open map[string]*pooled
	idle []*pooled // refs == 0, least recently used first
}

type pooled struct {
	path string
	f    formats.ReadAtCloser
	refs int
	keep bool // a decoded stream: never closed before the end
}

func newReaderPool(dir checkedDir, decoded map[string]func() (formats.ReadAtCloser, error)) *readerPool {
	return &readerPool{dir: dir, decoded: decoded, open: map[string]*pooled{}}
}

// acquire returns the open file at path; call release when done with it.
func (p *readerPool) acquire(path string) (r io.ReaderAt, release func(), err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.open[path]
	if !ok {
		open := func() (formats.ReadAtCloser, error) { return p.dir.Open(path) }
		dec := p.decoded[path]
		if dec != nil {
			open = dec
		}
		f, err := open()
		if err != nil {
			return nil, nil, err
		}
		e = &pooled{path: path, f: f, keep: dec != nil}
		p.open[path] = e
	}
	if e.refs == 0 {
		p.unidle(e)
	}
	e.refs++
	var once sync.Once
	return e.f, func() { once.Do(func() { p.release(e) }) }, nil
}

func (p *readerPool) release(e *pooled) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.refs--; e.refs > 0 || e.keep {
		return
	}
	p.idle = append(p.idle, e)
	if len(p.idle) > maxIdleFiles {
		old := p.idle[0]
		p.idle = p.idle[1:]
		delete(p.open, old.path)
		old.f.Close()
	}
}

func (p *readerPool) unidle(e *pooled) {
	for i, x := range p.idle {
		if x == e {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			return
		}
	}
}

// openFiles is the number of files the pool holds open (for tests).
func (p *readerPool) openFiles() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.open)
}

func (p *readerPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.open {
		e.f.Close()
	}
	p.open, p.idle = map[string]*pooled{}, nil
}

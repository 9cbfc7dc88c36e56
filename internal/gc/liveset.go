package gc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/mstore/mstore/internal/objects"
)

// DefaultLiveBudget is the most bytes of needed digests a plan holds in
// memory (a liveSet), unless Options say otherwise. A store of 16 versions
// of 100,000 new blobs each needs 51 MB of them, and merging them held 85
// MB at its peak: gc's memory grew with the store. Beyond the budget, what
// is held is written to a run (spill), and a plan reads the digests back,
// merged, in each pass over the records.
const DefaultLiveBudget = 16 << 20

// maxRuns is the most runs a liveSet keeps: one more spill first merges
// them into one, so that a pass reads from a bounded number of files
// (each through a buffer of runBuffer bytes).
const (
	maxRuns   = 32
	runBuffer = 64 << 10
)

// liveSet gathers the digests the named versions need, and gives them back
// in key order, each once, in as many passes as its user needs (stream).
// Appended digests wait in pending until they are as many as those held
// (or the budget, or 1 Mi), then are sorted and merged in: a blob that
// many versions need costs 32 bytes once, and the merges cost O(n log n)
// in all. Past its budget, the held digests go to a run: a file of them,
// in key order, created by scratch (the store's, which leaves nothing
// behind a crash).
type liveSet struct {
	budget        int // digests held at most
	held, pending []objects.Digest
	runs          []*os.File
	scratch       func() (*os.File, error)
}

// newLiveSet holds at most budget bytes of digests (DefaultLiveBudget if
// 0); its runs are files made by scratch.
func newLiveSet(budget int, scratch func() (*os.File, error)) *liveSet {
	if budget <= 0 {
		budget = DefaultLiveBudget
	}
	return &liveSet{budget: max(budget/len(objects.Digest{}), 1), scratch: scratch}
}

// reserve makes room for n more pending digests, doubling: appends of a
// manifest's blobs at a time grew the list by a quarter each time, and
// allocated five times what it held.
func (s *liveSet) reserve(n int) {
	if cap(s.pending)-len(s.pending) < n {
		s.pending = slices.Grow(s.pending, max(n, min(cap(s.pending), s.budget)))
	}
}

// settle merges what is pending once it is worth it, and spills what is
// held once it is over the budget.
func (s *liveSet) settle() error {
	if len(s.pending) >= max(len(s.held), min(1<<20, s.budget)) {
		s.flush()
	}
	if len(s.held) >= s.budget {
		return s.spill()
	}
	return nil
}

func (s *liveSet) flush() {
	objects.SortDigests(s.pending)
	if len(s.held) == 0 { // the first: pending becomes what is held
		s.held, s.pending = slices.Compact(s.pending), nil
		return
	}
	s.held = mergeDigests(s.held, slices.Compact(s.pending))
	s.pending = s.pending[:0]
}

// spill writes what is held to a new run and lets it go; at maxRuns, the
// runs are merged into one first.
func (s *liveSet) spill() error {
	if len(s.runs) == maxRuns {
		merged, err := s.writeRun(s.stream(false))
		if err != nil {
			return err
		}
		for _, f := range s.runs {
			f.Close()
		}
		s.runs = []*os.File{merged}
	}
	f, err := s.writeRun(streamOf([]*digestSource{{held: s.held}}))
	if err != nil {
		return err
	}
	s.runs = append(s.runs, f)
	s.held = nil
	return nil
}

// writeRun writes what from gives into a new run.
func (s *liveSet) writeRun(from *liveStream) (*os.File, error) {
	f, err := s.scratch()
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(f, runBuffer)
	for d, ok := from.peek(); ok; d, ok = from.advance() {
		w.Write(d[:]) // a failed write fails the Flush below
	}
	if err := from.err; err != nil {
		f.Close()
		return nil, err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return nil, fmt.Errorf("gc: write the needed blobs' digests: %w", err)
	}
	return f, nil
}

// finish merges what is still pending; the set is then read by stream.
func (s *liveSet) finish() {
	s.flush()
	s.pending = nil
}

// stream starts a pass over the set (withHeld) or its runs only, in key
// order, each digest once.
func (s *liveSet) stream(withHeld bool) *liveStream {
	var srcs []*digestSource
	if withHeld && len(s.held) > 0 {
		srcs = append(srcs, &digestSource{held: s.held})
	}
	for _, f := range s.runs {
		srcs = append(srcs, &digestSource{run: bufio.NewReaderSize(io.NewSectionReader(f, 0, 1<<62), runBuffer)})
	}
	return streamOf(srcs)
}

// close lets the runs go (their files have no names: closing them frees
// their space).
func (s *liveSet) close() {
	for _, f := range s.runs {
		f.Close()
	}
	s.runs, s.held, s.pending = nil, nil, nil
}

// liveStream is one pass over a liveSet: the merge of its runs and what it
// holds. peek gives the current digest; advance moves past it (and past
// any copy of it in another source) and gives the next.
type liveStream struct {
	srcs []*digestSource
	cur  objects.Digest
	ok   bool
	err  error
}

// digestSource is one sorted source of a pass: a run being read, or the
// digests held in memory.
type digestSource struct {
	run  *bufio.Reader
	held []objects.Digest
	cur  objects.Digest
	ok   bool
}

func (src *digestSource) next() error {
	if src.run == nil {
		src.ok = len(src.held) > 0
		if src.ok {
			src.cur, src.held = src.held[0], src.held[1:]
		}
		return nil
	}
	_, err := io.ReadFull(src.run, src.cur[:])
	src.ok = err == nil
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return fmt.Errorf("gc: read back the needed blobs' digests: %w", err)
	}
	return nil
}

// streamOf starts a pass over srcs, each in key order.
func streamOf(srcs []*digestSource) *liveStream {
	st := &liveStream{srcs: srcs}
	for _, src := range srcs {
		if err := src.next(); err != nil {
			st.err = err
			return st
		}
	}
	st.pick()
	return st
}

// pick makes the least current digest of the sources the stream's.
func (st *liveStream) pick() {
	st.ok = false
	for _, src := range st.srcs {
		if src.ok && (!st.ok || objects.CompareDigests(src.cur, st.cur) < 0) {
			st.cur, st.ok = src.cur, true
		}
	}
}

func (st *liveStream) peek() (objects.Digest, bool) { return st.cur, st.ok && st.err == nil }

// seek moves past every digest before d, calling passed (if not nil) with
// each, and reports whether d is the stream's next.
func (st *liveStream) seek(d objects.Digest, passed func(objects.Digest)) bool {
	c, ok := st.peek()
	for ; ok && objects.CompareDigests(c, d) < 0; c, ok = st.advance() {
		if passed != nil {
			passed(c)
		}
	}
	return ok && c == d
}

func (st *liveStream) advance() (objects.Digest, bool) {
	if !st.ok || st.err != nil {
		return objects.Digest{}, false
	}
	for _, src := range st.srcs {
		if src.ok && src.cur == st.cur {
			if err := src.next(); err != nil {
				st.err = err
				return objects.Digest{}, false
			}
		}
	}
	st.pick()
	return st.peek()
}

// mergeDigests merges b into a, both in key order and each digest once in
// each, and returns the result the same way; it may reuse a's memory.
func mergeDigests(a, b []objects.Digest) []objects.Digest {
	n := len(a)
	a = slices.Grow(a, len(b))[:n+len(b)]
	i, j := n-1, len(b)-1
	for k := len(a) - 1; j >= 0; k-- { // from the back: a's own elements are moved before they are overwritten
		if i >= 0 && objects.CompareDigests(a[i], b[j]) > 0 {
			a[k] = a[i]
			i--
		} else {
			a[k] = b[j]
			j--
		}
	}
	return slices.Compact(a)
}

package archiver

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"sync"
	"sync/atomic"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
)

// smallExtent is the size below which an extent is read with its
// neighbours, a block at a time, rather than on its own: a file of 100,000
// tensors of 512 B is read in 1 MB blocks, hashed as a file one block at a
// time, and its tensors handed to the storing side by the block, not one
// read, one hand-over and one wake-up per tensor.
const (
	smallExtent = 256 << 10
	blockSize   = 1 << 20
)

// buffers lends the buffers of one add's reads and takes them back, a
// buffer given back on any goroutine being the next one lent. A sync.Pool
// keeps one in each P's private slot, where the reading side's P cannot
// take it: with the writers' Ps (procs.go), the base add's peak RSS was
// 30 MB higher from buffers made while others lay there.
type buffers struct {
	mu   sync.Mutex
	size int
	free []*[]byte
}

func (b *buffers) get() *[]byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := len(b.free); n > 0 {
		bp := b.free[n-1]
		b.free = b.free[:n-1]
		return bp
	}
	buf := make([]byte, b.size)
	return &buf
}

func (b *buffers) put(bp *[]byte) {
	*bp = (*bp)[:cap(*bp)]
	b.mu.Lock()
	b.free = append(b.free, bp)
	b.mu.Unlock()
}

// readBuffers are an add's buffers of chunks and of blocks (of small
// extents, read together).
type readBuffers struct{ chunks, blocks buffers }

func newReadBuffers() *readBuffers {
	return &readBuffers{chunks: buffers{size: objects.ChunkSize}, blocks: buffers{size: blockSize}}
}

// batch is what the reading side of filePass hands on: file, bytes of the
// file read in order (a block or a chunk), and the chunks of stored spans
// in it, each data a slice of the buffer bp, as file is.
type batch struct {
	bp    *[]byte
	pool  *buffers // bp's
	file  []byte
	items []batchItem
	pass  *passState
}

type batchItem struct {
	s    *span
	c    int // chunk index in s
	data []byte
}

// passState is one file pass's: its batches not yet written, and the
// first failure to store one (which stops the pass's reading side).
type passState struct {
	pending sync.WaitGroup
	err     atomic.Pointer[error]
}

// directWriters is how many chunks are written at once, by the writers
// every file pass of an add shares: a direct write waits for the device,
// and the others keep it busy. One file alone (a model of one large
// file) has them all, where it had two writers of its own. A model whose
// bytes are mostly in large extents, read and written a chunk at a time,
// has chunkWriters (writersFor).
const (
	directWriters = 4
	chunkWriters  = 8
)

// writersFor is how many writers an add of files has. Eight chunks in
// flight kept the device busier than four: the bench family's base (988
// MB in 2 shards) added in 1.00-1.08 s against 1.05-1.28 s (medians of 4
// runs of 5-7, cp 0.98-1.24 s), for 16 MB more of chunk buffers. A model
// of small tensors, whose writers take blocks of many, was no faster with
// eight and held 7-9 MB more: it keeps four.
func writersFor(files []fileWork) int {
	var large, total int64
	for _, f := range files {
		for _, e := range f.Extents {
			if e.Size >= smallExtent {
				large += e.Size
			}
			total += e.Size
		}
	}
	if 2*large > total {
		return chunkWriters
	}
	return directWriters
}

// writeQueue is the storing side of the file passes: its writers take
// batches whose spans' whole digests are taken, give each chunk its own
// digest, store it and give the buffer back. A chunk's digest is taken
// beside its write, so that the three hashes of a large tensor's byte
// (file, tensor, chunk) run on three goroutines, the chunks' on several.
type writeQueue struct {
	w    *store.BlobWriter
	prog *counter
	ch   chan batch
	wg   sync.WaitGroup
	bufs *readBuffers // the file passes', given back by the writers
}

func startWriters(w *store.BlobWriter, prog *counter, writers int) *writeQueue {
	q := &writeQueue{w: w, prog: prog, ch: make(chan batch), bufs: newReadBuffers()}
	for range writers {
		q.wg.Go(func() {
			for b := range q.ch {
				q.store(b)
			}
		})
	}
	return q
}

// stop waits for the writers, once every file pass has ended.
func (q *writeQueue) stop() {
	close(q.ch)
	q.wg.Wait()
}

func (q *writeQueue) store(b batch) {
	st := b.pass
	var msgs [8][]byte
	var sums [8]objects.Digest
	for items := b.items; len(items) > 0 && st.err.Load() == nil; {
		// Up to eight small items at once: their digests side by side
		// (SumSmall), then one PutSmall (a batch of small tensors holds
		// thousands). A large item alone.
		n := 1
		small := len(items[0].data) < store.PackThreshold
		for small && n < min(len(msgs), len(items)) && len(items[n].data) < store.PackThreshold {
			n++
		}
		var size int64
		for k, it := range items[:n] {
			msgs[k] = it.data
			size += int64(len(it.data))
		}
		objects.SumSmall(msgs[:n], sums[:n])
		for k, it := range items[:n] {
			it.s.chunks[it.c] = sums[k]
			if len(it.s.chunks) == 1 {
				it.s.digest = sums[k]
			}
		}
		var err error
		if small {
			err = q.w.PutSmall(sums[:n], msgs[:n])
		} else {
			_, err = q.w.Put(sums[0], msgs[0])
		}
		if err != nil {
			failed := err // only a failure is kept: err itself stays off the heap
			st.err.Store(&failed)
		}
		q.prog.add(size)
		items = items[n:]
	}
	b.pool.put(b.bp)
	st.pending.Done()
}

// filePass reads file f once, in order: every byte goes through the file's
// hasher and, for the extents that are stored, through its chunk's (by
// q's writers) and a span's, for a span of several chunks. Reading, the
// file's hash and the spans' each have a goroutine: a model of one file
// (dense) had waited on the one that read and hashed the file. Padding
// must be zeros; a tensor placed again is hashed into again, for
// sameChunks. stored and again are f's, by extent.
func filePass(ctx context.Context, pool *readerPool, q *writeQueue, f fileWork, fs *span, stored []*span, again [][]objects.Digest, prog *counter) error {
	r, release, err := pool.acquire(f.Path)
	if err != nil {
		return err
	}
	defer release()

	runs := newCRCRuns(f)
	var st passState
	batches := make(chan batch, 1)
	filed := make(chan batch)
	hashed := make(chan struct{})
	go func() {
		defer close(filed)
		file := objects.NewHasher()
		for b := range batches {
			file.Write(b.file)
			runs.write(b.file)
			filed <- b
		}
		fs.digest = file.Digest()
	}()
	go func() {
		defer close(hashed)
		var h spanHasher
		for b := range filed {
			h.hash(b)
			q.ch <- b
		}
	}()
	err = passExtents(ctx, r, f, stored, again, prog, &st.err, q.bufs, func(b batch) {
		st.pending.Add(1)
		b.pass = &st
		batches <- b
	})
	close(batches)
	<-hashed
	st.pending.Wait()
	if err != nil {
		return err
	}
	if p := st.err.Load(); p != nil {
		return *p
	}
	return runs.result()
}

// crcRuns compares the CRC-32 of the runs a codec left to the add
// (File.CRC32Checks: a PyTorch checkpoint's storages) with the bytes of
// the file as the pass reads them, in order: the bytes stored are the
// bytes compared, each read once. The runs are in order, apart and inside
// the file (checkCoverage).
type crcRuns struct {
	path   string
	format string               // the codec's, whose refusal a mismatch is
	checks []formats.CRC32Check // those not yet compared
	at     int64                // the file offset of the next byte
	crc    uint32               // of checks[0]'s bytes so far
	err    error
}

func newCRCRuns(f fileWork) *crcRuns {
	return &crcRuns{path: f.Path, format: f.format, checks: f.CRC32Checks}
}

func (r *crcRuns) write(b []byte) {
	for len(r.checks) > 0 && r.err == nil {
		c := r.checks[0]
		if skip := min(int64(len(b)), c.Offset-r.at); skip > 0 { // bytes before the run
			b, r.at = b[skip:], r.at+skip
		}
		if r.at < c.Offset {
			return // b ended first
		}
		n := min(int64(len(b)), c.Offset+c.Size-r.at)
		r.crc = crc32.Update(r.crc, crc32.IEEETable, b[:n])
		b, r.at = b[n:], r.at+n
		if r.at < c.Offset+c.Size {
			return
		}
		if r.crc != c.Want {
			r.err = c.Mismatch(r.format, r.path)
		}
		r.checks, r.crc = r.checks[1:], 0
	}
	r.at += int64(len(b))
}

// result is the refusal of the first run whose CRC-32 differs, or an error
// if the pass ended before a run did.
func (r *crcRuns) result() error {
	if r.err == nil && len(r.checks) > 0 {
		return fmt.Errorf("add: %s: the file pass ended at byte %d, before the CRC-32 run at %d", r.path, r.at, r.checks[0].Offset)
	}
	return r.err
}

// spanHasher gives each span of several chunks, from the batches it is
// handed in order, the digest of all its chunks, hashed as they come (a
// span of one chunk has that chunk's digest: writeQueue.store). It is
// taken here rather than beside the file's hash.
type spanHasher struct{ whole *objects.Hasher }

func (h *spanHasher) hash(b batch) {
	for _, it := range b.items {
		n := len(it.s.chunks)
		if n == 1 {
			continue
		}
		if it.c == 0 { // passLarge hands a span's chunks over in order, from the first
			h.whole = objects.NewHasher()
		}
		h.whole.Write(it.data)
		if it.c == n-1 {
			it.s.digest = h.whole.Digest()
		}
	}
}

// passExtents is filePass's reading side; send hands each batch on, every
// byte of the file in order, and its buffer is given back downstream.
func passExtents(ctx context.Context, r io.ReaderAt, f fileWork, stored []*span, again [][]objects.Digest, prog *counter,
	storeErr *atomic.Pointer[error], bufs *readBuffers, send func(batch)) error {
	read := func(buf []byte, off int64) error {
		if _, err := r.ReadAt(buf, off); err != nil {
			return errs.Wrap(errs.InvalidArchive, "add", err, "%s: read %d bytes at %d", f.Path, len(buf), off)
		}
		return nil
	}
	for ei := 0; ei < len(f.Extents); {
		if err := ctx.Err(); err != nil {
			return err
		}
		if storeErr.Load() != nil {
			return nil // filePass reports it
		}
		if f.Extents[ei].Size < smallExtent {
			next, err := passSmall(f, ei, stored, again, prog, read, &bufs.blocks, send)
			if err != nil {
				return err
			}
			ei = next
			continue
		}
		if err := passLarge(ctx, f, ei, stored, again, prog, read, storeErr, &bufs.chunks, send); err != nil {
			return err
		}
		ei++
	}
	return nil
}

// passSmall reads the extents from ei on that are small, as many as fit a
// block, in one read, and returns the index of the first extent it left.
func passSmall(f fileWork, ei int, stored []*span, again [][]objects.Digest, prog *counter,
	read func([]byte, int64) error, blocks *buffers, send func(batch)) (int, error) {
	start, end, last := f.Extents[ei].Offset, f.Extents[ei].Offset, ei
	for last < len(f.Extents) && f.Extents[last].Size < smallExtent && f.Extents[last].Offset+f.Extents[last].Size-start <= blockSize {
		end = f.Extents[last].Offset + f.Extents[last].Size
		last++
	}
	bp := blocks.get()
	block := (*bp)[:end-start]
	if err := read(block, start); err != nil {
		blocks.put(bp)
		return 0, err
	}
	b := batch{bp: bp, pool: blocks, file: block}
	for k := ei; k < last; k++ {
		e := f.Extents[k]
		data := block[e.Offset-start : e.Offset-start+e.Size]
		s := stored[k]
		switch {
		case e.Size == 0:
		case s != nil:
			b.items = append(b.items, batchItem{s: s, data: data})
		case e.Kind == formats.Zeros:
			if err := checkZeros(&span{path: f.Path, off: e.Offset}, data); err != nil {
				blocks.put(bp)
				return 0, err
			}
			prog.add(e.Size)
		default: // a tensor placed again: one chunk, as it is small
			again[k] = []objects.Digest{objects.Sum(data)}
			prog.add(e.Size)
		}
	}
	send(b) // the storing side gives bp back, with or without items
	return last, nil
}

// passLarge reads extent ei a chunk at a time, each chunk into a buffer
// of its own.
func passLarge(ctx context.Context, f fileWork, ei int, stored []*span, again [][]objects.Digest, prog *counter,
	read func([]byte, int64) error, storeErr *atomic.Pointer[error], chunks *buffers, send func(batch)) error {
	e := f.Extents[ei]
	s := stored[ei]
	if s == nil && e.Kind == formats.TensorData {
		again[ei] = make([]objects.Digest, objects.ChunkCount(e.Size))
	}
	for c := range objects.ChunkCount(e.Size) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if storeErr.Load() != nil {
			return nil // filePass reports it
		}
		off, n := objects.ChunkBounds(e.Size, c)
		bp := chunks.get()
		buf := (*bp)[:n]
		if err := read(buf, e.Offset+off); err != nil {
			chunks.put(bp)
			return err
		}
		b := batch{bp: bp, pool: chunks, file: buf}
		switch {
		case s != nil:
			b.items = []batchItem{{s: s, c: c, data: buf}}
		case e.Kind == formats.Zeros:
			if err := checkZeros(&span{path: f.Path, off: e.Offset}, buf); err != nil {
				chunks.put(bp)
				return err
			}
			prog.add(n)
		default:
			again[ei][c] = objects.Sum(buf)
			prog.add(n)
		}
		send(b) // hashed into the file, then given back
	}
	return nil
}

package archiver

import (
	"context"
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

// blockPool holds the buffers of blocks (smaller than chunks: three in
// flight per file, for each file being added).
var blockPool = sync.Pool{New: func() any { b := make([]byte, blockSize); return &b }}

// batch is what the reading side of filePass hands to the storing side:
// chunks of stored spans, each data a slice of the buffer bp.
type batch struct {
	bp    *[]byte
	pool  *sync.Pool // bp's: bufPool or blockPool
	items []batchItem
}

type batchItem struct {
	s    *span
	c    int // chunk index in s
	data []byte
}

// directWriters is how many of a file's chunks are written at once: a
// direct write waits for the device, which the other keeps busy.
const directWriters = 2

// filePass reads file f once, in order: every byte goes through the file's
// hasher and, for the extents that are stored, through its chunk's (and a
// span's, for a span of several chunks: chunkHasher), and the chunks,
// hashed and stored, become the span's chunks. The chunks are hashed on a
// goroutine of their own and written by directWriters more, so that one
// large file keeps two cores busy while a direct write waits for the
// device. Padding must be zeros; a tensor placed again is hashed into
// again, for sameChunks. stored and again are f's, by extent.
func filePass(ctx context.Context, pool *readerPool, w *store.BlobWriter, f fileWork, fs *span, stored []*span, again [][]objects.Digest, prog *counter) error {
	r, release, err := pool.acquire(f.Path)
	if err != nil {
		return err
	}
	defer release()

	batches := make(chan batch, 1)
	hashed := make(chan batch)
	var storeErr atomic.Pointer[error]
	done := make(chan struct{})
	go func() {
		defer close(hashed)
		var h chunkHasher
		for b := range batches {
			h.hash(b)
			hashed <- b
		}
	}()
	var writers sync.WaitGroup
	for range directWriters {
		writers.Go(func() {
			for b := range hashed {
				for _, it := range b.items {
					if storeErr.Load() != nil {
						break
					}
					if _, err := w.Put(it.s.chunks[it.c], it.data); err != nil {
						failed := err // only a failure is kept: err itself stays off the heap
						storeErr.Store(&failed)
					}
					prog.add(int64(len(it.data)))
				}
				*b.bp = (*b.bp)[:cap(*b.bp)]
				b.pool.Put(b.bp)
			}
		})
	}
	go func() { writers.Wait(); close(done) }()
	err = passExtents(ctx, r, f, fs, stored, again, prog, &storeErr, func(b batch) { batches <- b })
	close(batches)
	<-done
	if err != nil {
		return err
	}
	if p := storeErr.Load(); p != nil {
		return *p
	}
	return nil
}

// chunkHasher gives each chunk of the batches it is handed, in order, its
// digest, and each span its own: its one chunk's, or the digest of all its
// chunks, hashed as they come. The whole digest is taken here rather than
// by the reading side, which hashes the file: a large file's three hashes
// of every byte (file, chunk, tensor) are then split two ways.
type chunkHasher struct{ whole *objects.Hasher }

func (h *chunkHasher) hash(b batch) {
	for _, it := range b.items {
		d := objects.Sum(it.data)
		it.s.chunks[it.c] = d
		n := len(it.s.chunks)
		if n == 1 {
			it.s.digest = d
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

// passExtents is filePass's reading side; send hands a batch of chunks of
// stored spans to the storing side, which gives its buffer back.
func passExtents(ctx context.Context, r io.ReaderAt, f fileWork, fs *span, stored []*span, again [][]objects.Digest, prog *counter,
	storeErr *atomic.Pointer[error], send func(batch)) error {
	file := objects.NewHasher()
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
			next, err := passSmall(f, ei, stored, again, prog, file, read, send)
			if err != nil {
				return err
			}
			ei = next
			continue
		}
		if err := passLarge(ctx, f, ei, stored, again, prog, file, read, storeErr, send); err != nil {
			return err
		}
		ei++
	}
	fs.digest = file.Digest()
	return nil
}

// passSmall reads the extents from ei on that are small, as many as fit a
// block, in one read, and returns the index of the first extent it left.
func passSmall(f fileWork, ei int, stored []*span, again [][]objects.Digest, prog *counter, file *objects.Hasher,
	read func([]byte, int64) error, send func(batch)) (int, error) {
	start, end, last := f.Extents[ei].Offset, f.Extents[ei].Offset, ei
	for last < len(f.Extents) && f.Extents[last].Size < smallExtent && f.Extents[last].Offset+f.Extents[last].Size-start <= blockSize {
		end = f.Extents[last].Offset + f.Extents[last].Size
		last++
	}
	bp := blockPool.Get().(*[]byte)
	block := (*bp)[:end-start]
	if err := read(block, start); err != nil {
		blockPool.Put(bp)
		return 0, err
	}
	file.Write(block)
	b := batch{bp: bp, pool: &blockPool}
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
				blockPool.Put(bp)
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
func passLarge(ctx context.Context, f fileWork, ei int, stored []*span, again [][]objects.Digest, prog *counter, file *objects.Hasher,
	read func([]byte, int64) error, storeErr *atomic.Pointer[error], send func(batch)) error {
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
		bp := bufPool.Get().(*[]byte)
		buf := (*bp)[:n]
		if err := read(buf, e.Offset+off); err != nil {
			bufPool.Put(bp)
			return err
		}
		file.Write(buf)
		switch {
		case s != nil:
			send(batch{bp: bp, pool: &bufPool, items: []batchItem{{s: s, c: c, data: buf}}})
			continue
		case e.Kind == formats.Zeros:
			if err := checkZeros(&span{path: f.Path, off: e.Offset}, buf); err != nil {
				bufPool.Put(bp)
				return err
			}
		default:
			again[ei][c] = objects.Sum(buf)
		}
		prog.add(n)
		bufPool.Put(bp)
	}
	return nil
}

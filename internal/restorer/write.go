package restorer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/progress"
)

var bufPool = sync.Pool{New: func() any { b := make([]byte, objects.ChunkSize); return &b }}

var zeroBuf = make([]byte, 1<<16)

// fetched is what one read of the store gave: the verified bytes of a
// fetch's pieces, in order, in buf when it came from bufPool.
type fetched struct {
	buf  *[]byte
	data [][]byte
	err  error
}

// pieceSource gives the verified bytes of a plan's pieces that are read
// from the store (blobSource; tests give writeFile one that fails or
// stalls): read gives those among pcs (isRead), in order, read together;
// buf, when large enough, holds what is read.
type pieceSource interface {
	read(pcs []piece, buf []byte) ([][]byte, error)
}

// isRead reports whether pc's bytes come from the store: a blob's, or a
// tensor's made from a stored one (derived).
func (pc *piece) isRead() bool {
	return pc.frame == nil && !pc.zeros
}

// readSize is how many bytes reading pc reads from the store.
func (pc *piece) readSize() int64 {
	if pc.derived != nil {
		return pc.derived.readSize()
	}
	return pc.size
}

// A fetch is one read of the store for writeFile, on a goroutine of its
// own: a piece alone, or a batch of small ones read and verified together.
// A model of 100,000 small tensors was 100,000 reads, each on a goroutine
// of its own (whose stack grew in the hashing) with a Verify each: 0.9 of
// the 3.3 s of a checkout to npz. Derived pieces (a --dtype cast) are made
// in their fetch too, on every core, not by the writer one at a time.
type fetch struct {
	pieces []piece // a run of the file's pieces, from its first read one to its last
	reads  int     // how many of them are read (isRead)
	bytes  int64   // what holding them costs: read, and made when derived
	result chan fetched
}

const (
	batchPiece = 64 << 10 // pieces that read less than this are read in batches
	batchBytes = 1 << 20  // the most bytes a batch reads
	batchCount = 4096     // and the most pieces it reads
)

// fetchBytes bounds the bytes a writer's fetches hold, those running ahead
// of it and the one it writes, beside their number (a derived piece holds
// its source tensor and what it makes of it); one larger fetch runs alone.
// (A variable for tests.)
var fetchBytes int64 = 256 << 20

// fetchesOf cuts the pieces of pieces that are read from the store, in
// order, into fetches.
func fetchesOf(pieces []piece) []fetch {
	var out []fetch
	var first int     // where the open batch starts in pieces
	var batched int64 // the bytes it reads
	open := false
	for i := range pieces {
		pc := &pieces[i]
		if !pc.isRead() {
			continue
		}
		cost := pc.readSize()
		if pc.derived != nil {
			cost += pc.size
		}
		if pc.readSize() >= batchPiece {
			out = append(out, fetch{pieces: pieces[i : i+1], reads: 1, bytes: cost})
			open = false
			continue
		}
		if open {
			if last := &out[len(out)-1]; batched+pc.readSize() <= batchBytes && last.reads < batchCount {
				last.pieces = pieces[first : i+1]
				last.reads++
				last.bytes += cost
				batched += pc.readSize()
				continue
			}
		}
		out = append(out, fetch{pieces: pieces[i : i+1], reads: 1, bytes: cost})
		first, batched, open = i, pc.readSize(), true
	}
	for i := range out {
		out[i].result = make(chan fetched, 1) // buffered: a fetch never blocks after a cancel
	}
	return out
}

// writeFile writes f under root in order, hashing it on the way when its
// digest is known, while up to window fetches (each blob verified against
// its digest) run ahead of it. A file with an encoding is hashed as
// planned (its decoded stream, which the manifest describes) and written
// through its encoder. Files are created
// through an os.Root, so that no path, and no link planted in root while
// it is written, can lead a write out of it.
func writeFile(ctx context.Context, blobs pieceSource, f planFile, root string, window int, prog progress.Reporter) (err error) {
	var encode func(io.Writer) io.WriteCloser
	if f.encoding != "" {
		if encode = encoderFor(f.encoding); encode == nil {
			return errs.New(errs.UnsupportedVersion, "checkout", "%s: this build cannot write the encoding %q", f.path, f.encoding)
		}
	}
	out, err := createUnder(root, f.path, os.O_WRONLY)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("checkout: %w", cerr)
		}
	}()

	ctx, cancel := context.WithCancel(ctx)
	fetches := fetchesOf(f.pieces)
	// Every fetch is waited for before writeFile returns, error or not: a
	// read must never outlive the checkout's shared lock on the store (gc
	// would delete blob files under it) or the blob reader it uses.
	var running sync.WaitGroup
	var cur fetched // the fetch whose pieces are being written
	defer func() {
		cancel()
		running.Wait()
		if cur.buf != nil {
			bufPool.Put(cur.buf)
		}
		for _, ft := range fetches {
			select {
			case r := <-ft.result: // fetched, never written: give its buffer back
				if r.buf != nil {
					bufPool.Put(r.buf)
				}
			default:
			}
		}
	}()
	sem := make(chan struct{}, window)
	held := semaphore.NewWeighted(fetchBytes)
	weight := func(ft fetch) int64 { return min(ft.bytes, fetchBytes) }
	running.Go(func() {
		for _, ft := range fetches {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			if held.Acquire(ctx, weight(ft)) != nil {
				return
			}
			running.Go(func() {
				bp := bufPool.Get().(*[]byte) // a batch reads at most batchBytes, a blob a chunk
				data, err := blobs.read(ft.pieces, *bp)
				if err == nil && len(data) != ft.reads {
					err = fmt.Errorf("checkout: %s: a read of %d pieces gave %d", f.path, ft.reads, len(data))
				}
				ft.result <- fetched{buf: bp, data: data, err: err}
			})
		}
	})
	next, used := 0, 0 // the next fetch to wait for; cur.data[:used] are written

	// The whole file is hashed only when its digest is known in advance (a
	// file as added, a tree's file, a planned extra file); a re-layout's
	// files are parsed back and their tensors hashed (verifyRelayout).
	var hs *objects.Hasher
	if f.want != nil {
		hs = objects.NewHasher()
	}
	buffered := bufio.NewWriterSize(&writebackWriter{f: out}, 1<<20)
	var w io.Writer = buffered
	var enc io.WriteCloser
	if encode != nil {
		enc = encode(buffered)
		w = enc
	}
	// The CRC-32s of the planned tensors, when a frame needs them: a
	// slice, where a map of 100,000 took 4 MB.
	var crcs []uint32
	needCRCs, tensors := false, 0
	for _, pc := range f.pieces {
		needCRCs = needCRCs || len(pc.crcs()) > 0
		tensors = max(tensors, int(pc.tensor))
	}
	if needCRCs {
		crcs = make([]uint32, tensors)
	}
	var current int // the tensor (+1) of the piece being written
	write := func(b []byte) error {
		if crcs != nil && current > 0 {
			crcs[current-1] = crc32.Update(crcs[current-1], crc32.IEEETable, b)
		}
		if hs != nil {
			hs.Write(b)
		}
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("checkout: write %s: %w", f.path, err)
		}
		if prog != nil {
			prog.Add(int64(len(b)))
		}
		return nil
	}
	for _, pc := range f.pieces {
		current = int(pc.tensor)
		switch {
		case pc.frame != nil && len(pc.crcs()) > 0:
			b := bytes.Clone(pc.literal())
			for _, s := range pc.crcs() {
				if s.At < 0 || s.At > len(b)-4 || s.Tensor < 0 || int(s.Tensor) >= len(crcs) {
					return fmt.Errorf("checkout: %s: CRC-32 slot at %d of a %d-byte frame, of tensor %d", f.path, s.At, len(b), s.Tensor)
				}
				binary.LittleEndian.PutUint32(b[s.At:], s.Value(crcs[int(s.Tensor)]))
			}
			err = write(b)
		case pc.frame != nil:
			err = write(pc.literal())
		case pc.zeros:
			for left := pc.size; left > 0 && err == nil; left -= min(left, int64(len(zeroBuf))) {
				err = write(zeroBuf[:min(left, int64(len(zeroBuf)))])
			}
		default:
			if used == len(cur.data) {
				if cur.buf != nil {
					bufPool.Put(cur.buf)
				}
				if next > 0 { // written: what it held is free
					held.Release(weight(fetches[next-1]))
				}
				cur, used = fetched{}, 0
				select {
				case cur = <-fetches[next].result:
				case <-ctx.Done():
					return ctx.Err()
				}
				next++
				<-sem
				if cur.err != nil {
					return cur.err
				}
			}
			err = write(cur.data[used])
			used++
		}
		if err != nil {
			return err
		}
	}
	if enc != nil {
		if err := enc.Close(); err != nil {
			return fmt.Errorf("checkout: write %s: %w", f.path, err)
		}
	}
	if err := buffered.Flush(); err != nil {
		return fmt.Errorf("checkout: write %s: %w", f.path, err)
	}
	if hs == nil {
		return nil
	}
	if got := hs.Digest(); got != *f.want {
		return errs.New(errs.IntegrityError, "checkout", "%s: written file hashes to %s, the manifest says %s", f.path, got.Short(), f.want.Short())
	}
	return nil
}

// createUnder creates the new file path (slash-separated) under root,
// with its folders, opened with flag, through an os.Root: no path, and no
// link planted in root meanwhile, can lead the file out of it.
func createUnder(root, path string, flag int) (*os.File, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("checkout: %w", err)
	}
	defer r.Close() // the open file outlives its Root
	name := filepath.FromSlash(path)
	if dir := filepath.Dir(name); dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("checkout: %w", err)
		}
	}
	out, err := r.OpenFile(name, flag|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("checkout: %w", err)
	}
	return out, nil
}

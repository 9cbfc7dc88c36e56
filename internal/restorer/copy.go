package restorer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/progress"
	"github.com/mstore/mstore/internal/store"
)

// A file written back in its manifest's own layout is made of blobs and
// zeros only, each at an offset the manifest gives; a re-laid-out file
// whose bytes are all known in advance adds planned frames (copyable).
// copyStored lets the kernel move the blobs' bytes (copy_file_range from the blob or pack file into
// the output, no copy through user space; a reflink where the file system
// shares extents), then verifies each blob by hashing the bytes now in the
// output file, read through a mapping: what is checked is what was
// written. The whole file is not hashed again: it is exactly the verified
// blobs at the manifest's offsets, which add checked make up the file's
// digest (a re-laid-out file is parsed again and its tensors re-hashed,
// verifyRelayout). A coded blob (grouped, or a delta) cannot be moved as
// it lies: its job decodes it into memory, verifies it there and writes it
// at its offset, the jobs of a file running on every core at once
// (runDecoded), so that a checkout of coded blobs neither waits on one
// decoder nor hashes the whole file again.

// copyJob is a run of an output file written in one go: zeros, planned
// frame bytes, or blobs that lie one after the other in one file of the
// store.
type copyJob struct {
	off, size int64 // in the output file
	zeros     bool
	literal   []byte
	rec       store.BlobRecord // the first blob's
	pieces    []piece
	// parts, for a buffered job: small runs (padding between small
	// tensors, frames, short runs of packed blobs) assembled in memory and
	// written with one call rather than a copy and a mapping each.
	parts []copyJob
}

// smallJob is the size below which a run is buffered with its neighbours.
const smallJob = 64 << 10

// copyable reports whether copyStored can write f: no encoding, nothing
// computed while it is written (transformed tensors, CRC-32 slots), and no
// digest of the whole file to check but the manifest's own, which its
// verified blobs make up (a re-laid-out file is parsed and its tensors
// re-hashed after). Coded blobs are copyable too: a job decodes each into
// memory, verifies it there and writes it at its offset (runDecoded).
func copyable(f planFile) bool {
	if f.encoding != "" || f.want != nil && !f.stored {
		return false
	}
	if f.stored {
		return true // blobs and zeros only (storedFile): no need to look at 100,000 pieces
	}
	for _, pc := range f.pieces {
		if pc.derived != nil || len(pc.crcs()) > 0 {
			return false
		}
	}
	return true
}

// maxCopyJob bounds a run of packed blobs copied and mapped at once (the
// mapped pages count in the checkout's resident memory).
const maxCopyJob = 2 << 20

// copyJobs cuts f into jobs: a raw blob each, a run of blobs adjacent in
// one pack, or zeros.
func copyJobs(blobs *blobSource, f planFile) ([]copyJob, error) {
	var jobs []copyJob
	var off int64
	for i, pc := range f.pieces {
		switch {
		case pc.zeros:
			jobs = append(jobs, copyJob{off: off, size: pc.size, zeros: true})
			off += pc.size
			continue
		case pc.frame != nil:
			if int64(len(pc.literal())) != pc.size {
				return nil, fmt.Errorf("checkout: %s: a planned frame of %d bytes holds %d", f.path, pc.size, len(pc.literal()))
			}
			jobs = append(jobs, copyJob{off: off, size: pc.size, literal: pc.literal()})
			off += pc.size
			continue
		}
		rec, err := blobs.record(pc)
		if err != nil {
			return nil, err
		}
		// A coded blob is a job of its own: its stored bytes are not its
		// raw bytes, so it never joins a run copied as it lies.
		if n := len(jobs); n > 0 && rec.Encoding == store.EncodingPacked && !rec.Coded() {
			last := &jobs[n-1]
			if len(last.pieces) > 0 && last.rec.Encoding == store.EncodingPacked && !last.rec.Coded() && last.rec.Pack == rec.Pack &&
				last.rec.Offset+last.size == rec.Offset && last.off+last.size == off && last.size+pc.size <= maxCopyJob {
				last.size += pc.size
				last.pieces = last.pieces[:len(last.pieces)+1] // the pieces of a run are f.pieces[i-k:i+1]
				off += pc.size
				continue
			}
		}
		jobs = append(jobs, copyJob{off: off, size: pc.size, rec: rec, pieces: f.pieces[i : i+1]})
		off += pc.size
	}
	if off != f.size {
		return nil, fmt.Errorf("checkout: %s: pieces cover %d of %d bytes", f.path, off, f.size)
	}
	return bufferSmall(jobs), nil
}

// bufferSmall gathers consecutive small jobs into buffered ones of up to
// maxCopyJob bytes.
func bufferSmall(jobs []copyJob) []copyJob {
	var out []copyJob
	for _, j := range jobs {
		if j.size >= smallJob || j.rec.Encoding == store.EncodingRaw || j.rec.Coded() {
			out = append(out, j)
			continue
		}
		if n := len(out); n > 0 && out[n-1].parts != nil && out[n-1].size+j.size <= maxCopyJob {
			out[n-1].parts = append(out[n-1].parts, j)
			out[n-1].size += j.size
			continue
		}
		out = append(out, copyJob{off: j.off, size: j.size, parts: []copyJob{j}})
	}
	for i := range out {
		if len(out[i].parts) == 1 {
			out[i] = out[i].parts[0] // nothing to gather
		}
	}
	return out
}

// copyStored writes f (copyable) under root; up to workers jobs run at
// once.
func copyStored(ctx context.Context, blobs *blobSource, f planFile, root string, workers int, prog progress.Reporter) (err error) {
	jobs, err := copyJobs(blobs, f)
	if err != nil {
		return err
	}
	// Read and write: the written bytes are mapped to be verified.
	out, err := createUnder(root, f.path, os.O_RDWR)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("checkout: %w", cerr)
		}
	}()
	// Its final size first: a mapping of a written run never reaches past
	// the end of the file.
	if err := out.Truncate(f.size); err != nil {
		return fmt.Errorf("checkout: %s: %w", f.path, err)
	}
	df := &directFile{out: out}
	if slices.ContainsFunc(jobs, func(j copyJob) bool { return j.rec.Coded() }) {
		df = openDirect(out)
		defer df.Close()
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(workers, 1))
	for _, j := range jobs {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			if err := runCopyJob(blobs, df, f.path, j); err != nil {
				return err
			}
			startWriteback(out, j.off, j.size)
			if prog != nil {
				prog.Add(j.size)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err() // an interrupt before the last job started
}

func runCopyJob(blobs *blobSource, df *directFile, path string, j copyJob) error {
	out := df.out
	if j.parts != nil {
		return runBuffered(blobs, out, path, j)
	}
	if j.literal != nil {
		if _, err := out.WriteAt(j.literal, j.off); err != nil {
			return fmt.Errorf("checkout: write %s: %w", path, err)
		}
		return nil
	}
	if j.zeros {
		for at := j.off; at < j.off+j.size; {
			n := min(j.off+j.size-at, int64(len(zeroBuf)))
			if _, err := out.WriteAt(zeroBuf[:n], at); err != nil {
				return fmt.Errorf("checkout: write %s: %w", path, err)
			}
			at += n
		}
		return nil
	}
	if j.rec.Coded() {
		return runDecoded(blobs, df, path, j)
	}
	src, err := blobs.Locate(j.rec)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := df.copyFrom(src.File, src.Offset, j.off, j.size); err != nil {
		if errs.ClassOf(err) != 0 {
			return err
		}
		return fmt.Errorf("checkout: write %s: %w", path, err)
	}
	return verifyWritten(out, path, j)
}

// runDecoded writes a coded blob's job: the blob reader decodes it
// straight into a chunk buffer (a delta with its base) and verifies its raw
// digest there; the verified bytes are written at the blob's offset, past
// the page cache where they can be (directFile). Jobs run up to
// copyStored's workers at once, in any order: the decoding runs on every
// core, in memory bounded by a few chunks a worker (the buffer, the stored
// bytes, a delta's base).
func runDecoded(blobs *blobSource, df *directFile, path string, j copyJob) error {
	bp := store.ChunkScratch.Get().(*[]byte)
	defer store.ChunkScratch.Put(bp)
	data, err := blobs.Read(j.rec, directBuffer(*bp, j.off))
	if err != nil {
		return err
	}
	if int64(len(data)) != j.size { // Read checked the digest, which names size bytes
		return errs.New(errs.IntegrityError, "checkout", "blob %s decodes to %d bytes, the manifest needs %d", j.rec.Digest.Short(), len(data), j.size)
	}
	if err := df.writeAt(data, j.off); err != nil {
		return fmt.Errorf("checkout: write %s: %w", path, err)
	}
	return nil
}

// copyRange copies n bytes of src at soff to dst at doff, in the kernel
// when it can (copy_file_range), else through a buffer.
func copyRange(src *os.File, soff int64, dst *os.File, doff, n int64) error {
	for n > 0 {
		c, err := unix.CopyFileRange(int(src.Fd()), &soff, int(dst.Fd()), &doff, int(min(n, 1<<30)), 0)
		switch {
		case err == unix.EINTR:
			continue
		case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) ||
			errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EBADF) || errors.Is(err, unix.EPERM):
			return copyBuffered(src, soff, dst, doff, n)
		case err != nil:
			return err
		case c == 0:
			return errs.New(errs.IntegrityError, "checkout", "a blob file of the store is shorter than its record (run `mstore fsck`)")
		}
		n -= int64(c)
	}
	return nil
}

func copyBuffered(src *os.File, soff int64, dst *os.File, doff, n int64) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := src.ReadAt(buf[:k], soff); err != nil {
			return errs.Wrap(errs.IntegrityError, "checkout", err, "a blob file of the store cannot be read whole (run `mstore fsck`)")
		}
		if _, err := dst.WriteAt(buf[:k], doff); err != nil {
			return err
		}
		soff, doff, n = soff+k, doff+k, n-k
	}
	return nil
}

var pageSize = int64(os.Getpagesize())

// verifyWritten hashes each blob of j as it now is in out, through a
// read-only mapping of the run (or, where the file cannot be mapped, a
// read into a buffer).
func verifyWritten(out *os.File, path string, j copyJob) error {
	start := j.off / pageSize * pageSize
	var data []byte
	m, err := unix.Mmap(int(out.Fd()), start, int(j.off+j.size-start), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err == nil {
		defer unix.Munmap(m)
		data = m[j.off-start:]
	} else {
		bp := bufPool.Get().(*[]byte)
		defer bufPool.Put(bp)
		if int64(cap(*bp)) < j.size {
			*bp = make([]byte, j.size)
		}
		data = (*bp)[:j.size]
		if _, err := out.ReadAt(data, j.off); err != nil {
			return fmt.Errorf("checkout: read back %s: %w", path, err)
		}
	}
	var c blobCheck
	for _, pc := range j.pieces {
		if err := c.add(data[:pc.size], *pc.blob); err != nil {
			return err
		}
		data = data[pc.size:]
	}
	return c.flush()
}

// blobCheck verifies blobs up to eight at a time (objects.SumSmall): a
// run of small tensors is thousands of one-block blobs. The bytes added
// must stay as they are until the check that holds them is flushed.
type blobCheck struct {
	n    int
	msgs [8][]byte
	want [8]objects.Digest
}

func (c *blobCheck) add(b []byte, want objects.Digest) error {
	c.msgs[c.n], c.want[c.n] = b, want
	if c.n++; c.n == len(c.msgs) {
		return c.flush()
	}
	return nil
}

// flush verifies the blobs added since the last flush.
func (c *blobCheck) flush() error {
	var got [8]objects.Digest
	n := c.n
	c.n = 0
	objects.SumSmall(c.msgs[:n], got[:n])
	for i, d := range got[:n] {
		if d != c.want[i] { // the message is made only for a mismatch
			return objects.Verify(c.msgs[i], c.want[i], "blob "+c.want[i].Short())
		}
	}
	return nil
}

// runBuffered assembles a buffered job's parts in memory, verifies each
// blob there and writes the run with one call: the bytes verified are the
// bytes written. Packed blobs near each other in one pack (small tensors
// that padding separates in the output) are read with one read.
func runBuffered(blobs *blobSource, out *os.File, path string, j copyJob) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := (*bp)[:j.size]
	// The packed parts' span in their pack, when they share one.
	first := j.firstPacked()
	lo, hi, onePack := int64(-1), int64(0), true
	for _, p := range j.parts {
		if p.pieces == nil {
			continue // zeros, a frame
		}
		if p.rec.Pack != first.rec.Pack {
			onePack = false
			break
		}
		if lo < 0 || p.rec.Offset < lo {
			lo = p.rec.Offset
		}
		hi = max(hi, p.rec.Offset+p.size)
	}
	var span []byte
	if onePack && lo >= 0 && hi-lo <= int64(len(*bp)) {
		sp := bufPool.Get().(*[]byte)
		defer bufPool.Put(sp)
		src, err := blobs.Locate(store.BlobRecord{Digest: first.rec.Digest, Size: hi - lo, Encoding: store.EncodingPacked, Pack: first.rec.Pack, Offset: lo})
		if err != nil {
			return err
		}
		span = (*sp)[:hi-lo]
		if _, err := src.File.ReadAt(span, lo); err != nil {
			return errs.Wrap(errs.IntegrityError, "checkout", err, "a pack of the store cannot be read whole (run `mstore fsck`)")
		}
	}
	var c blobCheck // buf's blobs, verified before it is written
	for _, p := range j.parts {
		at := buf[p.off-j.off : p.off-j.off+p.size]
		switch {
		case p.literal != nil:
			copy(at, p.literal)
		case p.zeros:
			clear(at)
		case span != nil:
			copy(at, span[p.rec.Offset-lo:p.rec.Offset-lo+p.size])
		default:
			src, err := blobs.Locate(p.rec)
			if err != nil {
				return err
			}
			_, err = src.File.ReadAt(at, src.Offset)
			src.Close()
			if err != nil {
				return errs.Wrap(errs.IntegrityError, "checkout", err, "a blob file of the store cannot be read whole (run `mstore fsck`)")
			}
		}
		for _, pc := range p.pieces {
			if err := c.add(at[:pc.size], *pc.blob); err != nil {
				return err
			}
			at = at[pc.size:]
		}
	}
	if err := c.flush(); err != nil {
		return err
	}
	if _, err := out.WriteAt(buf, j.off); err != nil {
		return fmt.Errorf("checkout: write %s: %w", path, err)
	}
	return nil
}

// firstPacked is the first part of a buffered job that is a run of blobs.
func (j copyJob) firstPacked() copyJob {
	for _, p := range j.parts {
		if p.pieces != nil {
			return p
		}
	}
	return copyJob{}
}

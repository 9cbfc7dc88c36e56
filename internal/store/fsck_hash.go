package store

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/mstore/mstore/internal/objects"
)

// hashBatch is the most bytes of one pack re-hashed as one task.
const hashBatch = 16 << 20

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// withinPack reports whether the n bytes from off lie within a pack of
// size bytes. (Not off+n <= size: a damaged record's or journal line's
// values can make that sum overflow.)
func withinPack(off, n, size int64) bool {
	return off >= 0 && n >= 0 && off <= size && n <= size-off
}

// hashRange returns the digest of n bytes of r from off, reading exactly n.
func hashRange(r io.ReaderAt, off, n int64) (objects.Digest, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	h := objects.NewHasher()
	got, err := io.CopyBuffer(h, io.NewSectionReader(r, off, n), *bp)
	if err != nil {
		return objects.Digest{}, err
	}
	if got != n {
		return objects.Digest{}, fmt.Errorf("%d of %d bytes", got, n)
	}
	return h.Digest(), nil
}

// packWindow is the buffer a pack's blobs are re-hashed through: each read
// takes as many whole blobs as it holds (a raw packed blob is under
// PackThreshold), and each blob is hashed where it lies. A pack of 100,000
// blobs of 512 B is 61 reads, where a read and a hasher per blob made
// fsck of such a model allocate 900 MB and peak at 200 MB.
const packWindow = 2 * PackThreshold

// packScratch is what hashPacked reads and hashes a pack through: its
// window and the lists of the blobs the window holds, kept for the next
// run. Made for each run, the lists were 51 MB of garbage while fsck
// hashed a store of 1.6 million small blobs, beside its 99 MB of records:
// the heap reached 179 MB before the next collection, 141 with them reused.
type packScratch struct {
	win  []byte
	held []int // the blobs in the window not yet hashed
	msgs [][]byte
	sums []objects.Digest
}

var packScratches = sync.Pool{New: func() any { return &packScratch{win: make([]byte, packWindow)} }}

// hashPacked gives fn the digest of each of n blobs of one pack file, the
// i-th at(i) (offset and size), in offset order, or the error reading it.
// The blobs a window holds are hashed together (objects.SumSmall, eight
// small ones at a time) before it is read again; a blob larger than the
// window is read on its own.
func hashPacked(file io.ReaderAt, n int, at func(i int) (off, size int64), fn func(i int, got objects.Digest, err error)) {
	sc := packScratches.Get().(*packScratch)
	defer packScratches.Put(sc)
	var winOff int64
	var win []byte // the pack's bytes from winOff
	held, msgs := sc.held[:0], sc.msgs[:0]
	flush := func() {
		sc.sums = slices.Grow(sc.sums[:0], len(msgs))[:len(msgs)]
		objects.SumSmall(msgs, sc.sums)
		for k, i := range held {
			fn(i, sc.sums[k], nil)
		}
		held, msgs = held[:0], msgs[:0]
	}
	defer func() { sc.held, sc.msgs = held[:0], msgs[:0] }()
	for i := range n {
		off, size := at(i)
		if size > packWindow {
			flush()
			got, err := hashRange(file, off, size)
			fn(i, got, err)
			continue
		}
		if off < winOff || off+size > winOff+int64(len(win)) {
			flush()
			got, err := file.ReadAt(sc.win, off)
			if err != nil && err != io.EOF {
				win = nil
				fn(i, objects.Digest{}, err)
				continue
			}
			winOff, win = off, sc.win[:got]
			if off+size > winOff+int64(len(win)) {
				fn(i, objects.Digest{}, fmt.Errorf("%d of %d bytes", len(win), size))
				continue
			}
		}
		held = append(held, i)
		msgs = append(msgs, win[off-winOff:][:size])
	}
	flush()
}

// verifyFile re-hashes a loose blob file and compares it with its name.
func verifyFile(f StoredFile) error {
	file, err := os.Open(f.Path)
	if err != nil {
		return err
	}
	defer file.Close()
	got, err := hashRange(file, 0, f.Size)
	if err != nil {
		return err
	}
	if got != f.Digest {
		return fmt.Errorf("its bytes hash to %s, not to its name", got.Short())
	}
	return nil
}

// hashBlobs re-hashes every recorded blob, workers at a time: loose blobs
// one per task, packed blobs in runs of one pack read in offset order.
func (s *Store) hashBlobs(ctx context.Context, r *FsckReport, st *fsckState, files *storeFiles, workers int) error {
	var mu sync.Mutex
	finding := func(list *[]Finding, rec BlobRecord, path, format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		*list = append(*list, Finding{Kind: "blob", ID: rec.Digest.String(), Path: path, Size: rec.Size, Detail: fmt.Sprintf(format, args...)})
	}
	checked := func(rec BlobRecord) {
		mu.Lock()
		defer mu.Unlock()
		r.Blobs++
		r.Bytes += rec.Size
	}
	compare := func(rec BlobRecord, path string, got objects.Digest, err error) {
		checked(rec)
		switch {
		case err != nil:
			finding(&r.Corrupt, rec, path, "unreadable: %v", err)
		case got != rec.Digest:
			finding(&r.Corrupt, rec, path, "bytes hash to %s (bit rot or a torn write)", got.Short())
		}
	}

	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(workerCount(workers))
	// A pack's raw blobs, as indexes into st.recs (4 bytes each), each
	// pack's list made to size and hashed in runs cut from it: copies of
	// their digests, sizes and offsets were 39 MB more while fsck hashed
	// a store of 700,000 blobs, and lists grown by append 23 MB of garbage.
	recs := st.recs
	counts := make([]int, len(recs.packs))
	for i := range recs.list {
		if c := &recs.list[i]; c.enc == EncodingPacked && !c.coding.coded() {
			counts[c.pack]++
		}
	}
	byPack := make([][]uint32, len(recs.packs))
	for p, n := range counts {
		byPack[p] = make([]uint32, 0, n)
	}
	loose := files.loose // those of the records from i on
	reader := s.NewBlobReader()
	defer reader.Close()
	for i := range recs.list {
		c := &recs.list[i]
		if c.coding.coded() {
			rec := recs.record(i)
			// Decoded (with its base) and checked against its raw digest
			// on the one read path.
			if _, ok := files.packs[rec.Pack]; !ok {
				finding(&r.Missing, rec, relPath(s, s.PackPath(rec.Pack)), "the index records it in pack %s; the pack is missing", rec.Pack)
				continue
			}
			if rec.Coding == CodingDelta {
				if j, ok := recs.find(rec.Base); ok {
					b := recs.record(j)
					rec.BaseRec = &b
				}
			}
			g.Go(func() error {
				if err := ctx.Err(); err != nil {
					return err
				}
				_, err := reader.Read(rec, nil)
				checked(rec)
				if err != nil {
					finding(&r.Corrupt, rec, relPath(s, s.PackPath(rec.Pack)), "%s blob: %v", rec.Coding, err)
				}
				return nil
			})
			continue
		}
		if c.enc == EncodingPacked {
			byPack[c.pack] = append(byPack[c.pack], uint32(i))
			continue
		}
		rec := recs.record(i)
		for len(loose) > 0 && int(loose[0].i) < i {
			loose = loose[1:]
		}
		path := s.BlobPath(rec.Digest)
		rel := relPath(s, path)
		switch {
		case len(loose) == 0 || int(loose[0].i) != i:
			finding(&r.Missing, rec, rel, "the index records it; its file is missing")
			continue
		case loose[0].size != rec.Size:
			finding(&r.Corrupt, rec, rel, "file of %d bytes, recorded as %d", loose[0].size, rec.Size)
			continue
		}
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			file, err := os.Open(path)
			if err != nil {
				compare(rec, rel, objects.Digest{}, err)
				return nil
			}
			defer file.Close()
			got, err := hashRange(file, 0, rec.Size)
			compare(rec, rel, got, err)
			return nil
		})
	}
	for p, in := range byPack {
		id := recs.packs[p]
		f, ok := files.packs[id]
		rel := relPath(s, s.PackPath(id))
		if !ok {
			for _, i := range in {
				finding(&r.Missing, recs.record(int(i)), rel, "the index records it in pack %s; the pack is missing", id)
			}
			continue
		}
		sort.Slice(in, func(a, b int) bool { return recs.offset(int(in[a])) < recs.offset(int(in[b])) })
		// in[:kept] are the blobs within the file; in[start:kept] the run
		// not yet handed out. A run handed out is never written again.
		start, kept := 0, 0
		var size int64
		flush := func() {
			run := in[start:kept]
			start, size = kept, 0
			g.Go(func() error { return hashPackRun(ctx, f.Path, rel, recs, run, compare) })
		}
		for _, i := range in {
			off, n := recs.offset(int(i)), recs.size(int(i))
			if !withinPack(off, n, f.Size) {
				finding(&r.Corrupt, recs.record(int(i)), rel, "recorded at bytes %d-%d of a pack of %d bytes", off, off+n, f.Size)
				continue
			}
			in[kept] = i
			kept++
			if size += n; size >= hashBatch {
				flush()
			}
		}
		if kept > start {
			flush()
		}
	}
	return g.Wait()
}

// hashPackRun re-hashes the blobs run (indexes into recs, in offset order)
// of the pack file at path.
func hashPackRun(ctx context.Context, path, rel string, recs *fsckRecords, run []uint32, compare func(BlobRecord, string, objects.Digest, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	file, err := os.Open(path)
	if err != nil {
		for _, i := range run {
			compare(recs.record(int(i)), rel, objects.Digest{}, err)
		}
		return nil
	}
	defer file.Close()
	hashPacked(file, len(run), func(k int) (int64, int64) { return recs.offset(int(run[k])), recs.size(int(run[k])) },
		func(k int, got objects.Digest, err error) { compare(recs.record(int(run[k])), rel, got, err) })
	return nil
}

func relPath(s *Store, p string) string {
	if rel, err := filepath.Rel(s.dir, p); err == nil {
		return filepath.ToSlash(rel)
	}
	return p
}

package store

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/mstore/mstore/internal/objects"
)

// hashBatch is the most bytes of one pack re-hashed as one task.
const hashBatch = 16 << 20

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

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
	byPack := map[PackID][]BlobRecord{}
	reader := s.NewBlobReader()
	defer reader.Close()
	for _, d := range sortedDigests(st.recs) {
		rec := st.recs[d]
		if rec.Coded() {
			// Decoded (with its base) and checked against its raw digest
			// on the one read path.
			if _, ok := files.packs[rec.Pack]; !ok {
				finding(&r.Missing, rec, relPath(s, s.PackPath(rec.Pack)), "the index records it in pack %s; the pack is missing", rec.Pack)
				continue
			}
			if rec.Coding == CodingDelta {
				if b, ok := st.recs[rec.Base]; ok {
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
		if rec.Encoding == EncodingPacked {
			byPack[rec.Pack] = append(byPack[rec.Pack], rec)
			continue
		}
		f, ok := files.loose[d]
		rel := relPath(s, s.BlobPath(d))
		switch {
		case !ok:
			finding(&r.Missing, rec, rel, "the index records it; its file is missing")
			continue
		case f.Size != rec.Size:
			finding(&r.Corrupt, rec, rel, "file of %d bytes, recorded as %d", f.Size, rec.Size)
			continue
		}
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			file, err := os.Open(f.Path)
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
	for id, recs := range byPack {
		f, ok := files.packs[id]
		rel := relPath(s, s.PackPath(id))
		if !ok {
			for _, rec := range recs {
				finding(&r.Missing, rec, rel, "the index records it in pack %s; the pack is missing", id)
			}
			continue
		}
		sort.Slice(recs, func(i, j int) bool { return recs[i].Offset < recs[j].Offset })
		var batch []BlobRecord
		var size int64
		flush := func() {
			run := batch
			batch, size = nil, 0
			g.Go(func() error { return hashPackRun(ctx, f.Path, rel, run, compare) })
		}
		for _, rec := range recs {
			if rec.Offset+rec.Size > f.Size {
				finding(&r.Corrupt, rec, rel, "recorded at bytes %d-%d of a pack of %d bytes", rec.Offset, rec.Offset+rec.Size, f.Size)
				continue
			}
			batch = append(batch, rec)
			if size += rec.Size; size >= hashBatch {
				flush()
			}
		}
		if len(batch) > 0 {
			flush()
		}
	}
	return g.Wait()
}

func hashPackRun(ctx context.Context, path, rel string, run []BlobRecord, compare func(BlobRecord, string, objects.Digest, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	file, err := os.Open(path)
	if err != nil {
		for _, rec := range run {
			compare(rec, rel, objects.Digest{}, err)
		}
		return nil
	}
	defer file.Close()
	// Small blobs (a model of many small tensors packs thousands) are read
	// into a buffer each and hashed eight at a time (objects.SumSmall).
	var bufs [8][objects.SmallMax]byte
	var msgs [8][]byte
	var recs [8]BlobRecord
	var sums [8]objects.Digest
	n := 0
	flush := func() {
		objects.SumSmall(msgs[:n], sums[:n])
		for i := range n {
			compare(recs[i], rel, sums[i], nil)
		}
		n = 0
	}
	for _, rec := range run {
		if rec.Size > objects.SmallMax {
			got, err := hashRange(file, rec.Offset, rec.Size)
			compare(rec, rel, got, err)
			continue
		}
		if k, err := file.ReadAt(bufs[n][:rec.Size], rec.Offset); int64(k) != rec.Size {
			compare(rec, rel, objects.Digest{}, fmt.Errorf("%d of %d bytes: %w", k, rec.Size, err))
			continue
		}
		msgs[n], recs[n] = bufs[n][:rec.Size], rec
		if n++; n == len(msgs) {
			flush()
		}
	}
	flush()
	return nil
}

func relPath(s *Store, p string) string {
	if rel, err := filepath.Rel(s.dir, p); err == nil {
		return filepath.ToSlash(rel)
	}
	return p
}

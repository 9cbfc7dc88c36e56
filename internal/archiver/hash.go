package archiver

import (
	"context"
	"fmt"
	"io"
	"sort"

	"golang.org/x/sync/errgroup"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/prefault"
	"github.com/mstore/mstore/internal/store"
)

// span is a run of bytes in one of the model's files, hashed as a whole and
// in chunks. For a run of one chunk the two digests are the same hash and
// computed once.
type span struct {
	path      string
	off, size int64
	digest    objects.Digest
	chunks    []objects.Digest
}

// hashes holds every digest an add computes, filled in by the workers.
type hashes struct {
	tensors    []*span          // by tensor index
	frames     map[[2]int]*span // by (file index, extent index)
	files      []*span          // whole files, by file index
	configJSON []byte
}

// hashAndStore hashes every tensor, frame and file of the model and writes
// the chunks the store lacks. Each file is read once, in order (filePass):
// the bytes that give a file its digest are the bytes stored. Files are
// passed in parallel, the largest first, through pool.
func hashAndStore(ctx context.Context, pool *readerPool, l *formats.Layout, files []fileWork, w *store.BlobWriter, opts Options) (*hashes, error) {
	h := &hashes{tensors: make([]*span, len(l.Tensors)), frames: map[[2]int]*span{}, files: make([]*span, len(files))}
	var total int64
	// stored[fi][ei] is the span whose chunks extent ei of file fi stores:
	// a frame, or a tensor's first placement; nil for padding and for a
	// tensor placed again, whose chunks are compared (sameChunks).
	stored := make([][]*span, len(files))
	// Spans and their chunk digests are cut from two arenas: a model of
	// 100,000 small tensors costs two allocations, not 200,000.
	var nspans, nchunks int
	for _, f := range files {
		nspans += len(f.Extents)
		for _, e := range f.Extents {
			nchunks += objects.ChunkCount(e.Size)
		}
	}
	spans := make([]span, 0, nspans)
	digests := make([]objects.Digest, nchunks)
	prefault.Slice(spans) // filled below, while the GC may run (prefault)
	for fi, f := range files {
		h.files[fi] = &span{path: f.Path, size: f.Size}
		stored[fi] = make([]*span, len(f.Extents))
		for ei, e := range f.Extents {
			n := objects.ChunkCount(e.Size)
			spans = append(spans, span{path: f.Path, off: e.Offset, size: e.Size, chunks: digests[:n:n]})
			digests = digests[n:]
			s := &spans[len(spans)-1]
			if e.Size == 0 {
				s.digest = objects.Sum(nil)
			}
			switch e.Kind {
			case formats.TensorData:
				if h.tensors[e.Tensor] != nil {
					continue // the same tensor placed twice: stored once
				}
				h.tensors[e.Tensor] = s
			case formats.Frame:
				h.frames[[2]int{fi, ei}] = s
			default:
				continue
			}
			stored[fi][ei] = s
		}
		total += f.Size
		if f.Path == "config.json" && f.other && f.Size <= 16<<20 {
			h.configJSON = []byte{} // read below, with the other work
		}
	}
	for i, s := range h.tensors {
		if s == nil {
			return nil, errs.New(errs.SchemaError, "add", "tensor %q is not placed in any file", l.Tensors[i].Name)
		}
	}

	prog := &counter{p: opts.Progress}
	if opts.Progress != nil {
		opts.Progress.Start(total)
		defer opts.Progress.Finish()
	}

	// Direct writes block their threads: the writers get Ps of their own
	// (procs.go), so that hashing never waits beside an idle CPU.
	writers := writersFor(files)
	defer addProcs(writers)()
	q := startWriters(w, prog, writers)
	g, gctx := errgroup.WithContext(ctx)
	type task struct {
		size int64
		run  func() error
	}
	var tasks []task
	again := make([][][]objects.Digest, len(files)) // chunk digests of tensors placed again, by file and extent
	for fi, f := range files {
		switch {
		case f.Size == 0:
		case singleChunkFrame(f) != nil:
			// Its digest is its one chunk's, filled in by manifest().
			s := stored[fi][0]
			tasks = append(tasks, task{f.Size, func() error { return storeChunk(pool, s, w, &q.bufs.chunks, prog) }})
		default:
			again[fi] = make([][]objects.Digest, len(f.Extents))
			tasks = append(tasks, task{f.Size, func() error {
				return filePass(gctx, pool, q, f, h.files[fi], stored[fi], again[fi], prog)
			}})
		}
	}
	if h.configJSON != nil {
		tasks = append(tasks, task{0, func() error {
			f, release, err := pool.acquire("config.json")
			if err != nil {
				return err
			}
			defer release()
			b, err := io.ReadAll(io.NewSectionReader(f, 0, 16<<20))
			h.configJSON = b
			return err
		}})
	}
	sort.SliceStable(tasks, func(i, j int) bool { return tasks[i].size > tasks[j].size })

	g.SetLimit(workers(opts.Workers))
	for _, t := range tasks {
		if gctx.Err() != nil {
			break
		}
		g.Go(t.run)
	}
	err := g.Wait()
	q.stop()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err // an interrupt before the last task started
	}
	return h, sameChunks(files, h, again)
}

// sameChunks requires a tensor placed twice to be the same bytes twice: a
// file's digest then names exactly what checkout rebuilds from the blobs.
func sameChunks(files []fileWork, h *hashes, again [][][]objects.Digest) error {
	for fi, f := range files {
		for ei, seen := range again[fi] {
			if seen == nil {
				continue
			}
			e := f.Extents[ei]
			want := h.tensors[e.Tensor].chunks
			if len(want) != len(seen) {
				return fmt.Errorf("add: codec layout of %s places tensor %d at two sizes", f.Path, e.Tensor)
			}
			for c, d := range seen {
				if d != want[c] {
					off, n := objects.ChunkBounds(e.Size, c)
					return errChanged(f.Path, fmt.Sprintf("the %d bytes at %d are not the bytes of the tensor they repeat", n, e.Offset+off))
				}
			}
		}
	}
	return nil
}

// singleChunkFrame returns the one frame extent of a file made of exactly
// one chunk-sized frame, whose digest is therefore the file's.
func singleChunkFrame(f fileWork) *formats.Extent {
	if len(f.Extents) == 1 && f.Extents[0].Kind == formats.Frame && f.Extents[0].Size <= objects.ChunkSize {
		return &f.Extents[0]
	}
	return nil
}

// storeChunk reads, hashes and stores s, a span of one chunk.
func storeChunk(pool *readerPool, s *span, w *store.BlobWriter, chunks *buffers, prog *counter) error {
	r, release, err := pool.acquire(s.path)
	if err != nil {
		return err
	}
	defer release()
	bp := chunks.get()
	defer chunks.put(bp)
	buf := (*bp)[:s.size]
	if _, err := r.ReadAt(buf, s.off); err != nil {
		return errs.Wrap(errs.InvalidArchive, "add", err, "%s: read %d bytes at %d", s.path, s.size, s.off)
	}
	s.digest = objects.Sum(buf)
	s.chunks[0] = s.digest
	if _, err := w.Put(s.digest, buf); err != nil {
		return err
	}
	prog.add(s.size)
	return nil
}

func checkZeros(s *span, b []byte) error {
	for _, c := range b {
		if c != 0 {
			return errs.At(errs.InvalidArchive, "add", s.path, s.off, "padding holds non-zero bytes")
		}
	}
	return nil
}

// manifest builds the manifest from the layout and the digests. It
// changes neither: Add runs verifyStored, which reads them, at the same
// time.
func (h *hashes) manifest(l *formats.Layout, files []fileWork) *objects.Manifest {
	m := &objects.Manifest{Schema: objects.ManifestSchema, Format: l.Format,
		Tensors: make([]objects.Tensor, 0, len(l.Tensors)), Files: make([]objects.File, 0, len(files))}
	prefault.Slice(m.Tensors) // 12 MB for 100,000 tensors, filled at once (prefault)
	var dims int
	for _, t := range l.Tensors {
		dims += len(t.Shape)
	}
	shapes := make([]int64, 0, dims) // one arena for every tensor's shape
	for i, t := range l.Tensors {
		s := h.tensors[i]
		digest := s.digest
		if s.size == 0 {
			digest = objects.Sum(nil)
		}
		start := len(shapes)
		shapes = append(shapes, t.Shape...)
		m.Tensors = append(m.Tensors, objects.Tensor{Name: t.Name, DType: t.DType, Shape: shapes[start:len(shapes):len(shapes)],
			Size: t.Size, Digest: digest, Chunks: s.chunks})
	}
	for fi, f := range files {
		mf := objects.File{Path: f.Path, Size: f.Size, Role: objects.RoleContainer, Meta: f.Meta}
		if f.StoredMeta != nil {
			mf.Meta = f.StoredMeta
		}
		switch {
		case f.other:
			mf.Role = objects.RoleOther
		case f.Index:
			mf.Role = objects.RoleIndex
		}
		mf.Extents = make([]objects.Extent, 0, len(f.Extents))
		prefault.Slice(mf.Extents)
		for ei, e := range f.Extents {
			me := objects.Extent{Size: e.Size}
			switch e.Kind {
			case formats.TensorData:
				me.Kind, me.Tensor = objects.ExtentTensor, e.Tensor
			case formats.Zeros:
				me.Kind = objects.ExtentZeros
			case formats.Frame:
				s := h.frames[[2]int{fi, ei}]
				me.Kind, me.Data = objects.ExtentFrame, &objects.Data{Digest: s.digest, Chunks: s.chunks}
			}
			mf.Extents = append(mf.Extents, me)
		}
		switch {
		case f.Size == 0:
			mf.Digest = objects.Sum(nil)
			mf.Extents = []objects.Extent{}
		case singleChunkFrame(f) != nil:
			mf.Digest = h.frames[[2]int{fi, 0}].digest
		default:
			mf.Digest = h.files[fi].digest
		}
		m.Files = append(m.Files, mf)
	}
	if m.Tensors == nil {
		m.Tensors = []objects.Tensor{}
	}
	return m
}

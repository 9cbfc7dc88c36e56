package archiver

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/mstore/mstore/formats"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/objects"
	"github.com/mstore/mstore/store"
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

var bufPool = sync.Pool{New: func() any { b := make([]byte, objects.ChunkSize); return &b }}

// hashAndStore hashes every tensor, frame and file of the model and writes
// the chunks the store lacks. Independent pieces of work run in parallel,
// the largest first. The files are read through pool.
func hashAndStore(ctx context.Context, pool *readerPool, l *formats.Layout, files []fileWork, w *store.BlobWriter, opts Options) (*hashes, error) {
	h := &hashes{tensors: make([]*span, len(l.Tensors)), frames: map[[2]int]*span{}, files: make([]*span, len(files))}
	var total int64
	var chunked []*span // spans whose chunks are stored
	for fi, f := range files {
		h.files[fi] = &span{path: f.Path, size: f.Size}
		for ei, e := range f.Extents {
			s := &span{path: f.Path, off: e.Offset, size: e.Size}
			switch e.Kind {
			case formats.TensorData:
				if h.tensors[e.Tensor] != nil {
					continue // the same tensor placed twice: stored once
				}
				h.tensors[e.Tensor] = s
				chunked = append(chunked, s)
			case formats.Frame:
				h.frames[[2]int{fi, ei}] = s
				chunked = append(chunked, s)
			}
			total += e.Size
		}
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

	type task struct {
		size int64
		run  func() error
	}
	var tasks []task
	for _, s := range chunked {
		s.chunks = make([]objects.Digest, objects.ChunkCount(s.size))
		if len(s.chunks) == 1 {
			tasks = append(tasks, task{s.size, func() error { return storeChunk(pool, s, 0, w, prog, nil) }})
			continue
		}
		// A run of several chunks is read once, in order: each chunk is
		// hashed and stored, and the whole run hashed on the way.
		tasks = append(tasks, task{s.size, func() error {
			// Held open across the chunks (storeChunk acquires it again).
			_, release, err := pool.acquire(s.path)
			if err != nil {
				return err
			}
			defer release()
			whole := objects.NewHasher()
			for i := range s.chunks {
				if err := storeChunk(pool, s, i, w, prog, whole); err != nil {
					return err
				}
			}
			s.digest = whole.Digest()
			return nil
		}})
	}
	seen := make([][][]objects.Digest, len(files)) // by file, extent: chunk digests of the file's own pass
	for fi, f := range files {
		s := h.files[fi]
		if singleChunkFrame(f) != nil || f.Size == 0 {
			continue // its digest is its one chunk's, filled in by manifest()
		}
		seen[fi] = make([][]objects.Digest, len(f.Extents))
		tasks = append(tasks, task{s.size, func() error { return hashFile(pool, f, s, seen[fi], prog) }})
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

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers(opts.Workers))
	for _, t := range tasks {
		if gctx.Err() != nil {
			break
		}
		g.Go(t.run)
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err // an interrupt before the last task started
	}
	return h, sameChunks(files, h, seen)
}

// sameChunks requires the bytes each file's digest was computed from to be
// the ones stored (and a tensor placed twice to be the same bytes twice):
// a file's digest then names exactly what checkout rebuilds from the blobs.
func sameChunks(files []fileWork, h *hashes, seen [][][]objects.Digest) error {
	for fi, f := range files {
		if seen[fi] == nil {
			continue
		}
		for ei, e := range f.Extents {
			var stored []objects.Digest
			switch e.Kind {
			case formats.Frame:
				stored = h.frames[[2]int{fi, ei}].chunks
			case formats.TensorData:
				stored = h.tensors[e.Tensor].chunks
			default:
				continue
			}
			if len(stored) != len(seen[fi][ei]) {
				return fmt.Errorf("add: codec layout of %s places tensor %d at two sizes", f.Path, e.Tensor)
			}
			for c, d := range seen[fi][ei] {
				if d != stored[c] {
					off, n := objects.ChunkBounds(e.Size, c)
					return errChanged(f.Path, fmt.Sprintf("the %d bytes at %d read twice were not the same", n, e.Offset+off))
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

// storeChunk reads, hashes and stores chunk i of s, and writes it to whole
// when there is one.
func storeChunk(pool *readerPool, s *span, i int, w *store.BlobWriter, prog *counter, whole *objects.Hasher) error {
	r, release, err := pool.acquire(s.path)
	if err != nil {
		return err
	}
	defer release()
	off, n := objects.ChunkBounds(s.size, i)
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := (*bp)[:n]
	if _, err := r.ReadAt(buf, s.off+off); err != nil {
		return errs.Wrap(errs.InvalidArchive, "add", err, "%s: read %d bytes at %d", s.path, n, s.off+off)
	}
	d := objects.Sum(buf)
	s.chunks[i] = d
	if whole != nil {
		whole.Write(buf)
	} else {
		s.digest = d
	}
	if _, err := w.Put(d, buf); err != nil {
		return err
	}
	prog.add(n)
	return nil
}

// hashFile streams the file of s through one hasher, a chunk of an extent
// at a time: the digest of each frame and tensor chunk it read goes to
// seen (by extent), for sameChunks; padding must be zeros.
func hashFile(pool *readerPool, f fileWork, s *span, seen [][]objects.Digest, prog *counter) error {
	r, release, err := pool.acquire(s.path)
	if err != nil {
		return err
	}
	defer release()
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	hs := objects.NewHasher()
	for ei, e := range f.Extents {
		if e.Kind != formats.Zeros {
			seen[ei] = make([]objects.Digest, objects.ChunkCount(e.Size))
		}
		for c := range objects.ChunkCount(e.Size) {
			off, n := objects.ChunkBounds(e.Size, c)
			buf := (*bp)[:n]
			if _, err := r.ReadAt(buf, e.Offset+off); err != nil {
				return errs.Wrap(errs.InvalidArchive, "add", err, "%s: read %d bytes at %d", s.path, n, e.Offset+off)
			}
			if e.Kind == formats.Zeros {
				if err := checkZeros(&span{path: s.path, off: e.Offset}, buf); err != nil {
					return err
				}
				prog.add(n)
			} else {
				seen[ei][c] = objects.Sum(buf)
			}
			hs.Write(buf)
		}
	}
	s.digest = hs.Digest()
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

// manifest builds the manifest from the layout and the digests.
func (h *hashes) manifest(l *formats.Layout, files []fileWork) *objects.Manifest {
	m := &objects.Manifest{Schema: objects.ManifestSchema, Format: l.Format}
	for i, t := range l.Tensors {
		s := h.tensors[i]
		if s.size == 0 {
			s.digest = objects.Sum(nil)
		}
		m.Tensors = append(m.Tensors, objects.Tensor{Name: t.Name, DType: t.DType, Shape: append([]int64{}, t.Shape...),
			Size: t.Size, Digest: s.digest, Chunks: s.chunks})
	}
	for fi, f := range files {
		mf := objects.File{Path: f.Path, Size: f.Size, Role: objects.RoleContainer, Meta: f.Meta}
		switch {
		case f.other:
			mf.Role = objects.RoleOther
		case f.Index:
			mf.Role = objects.RoleIndex
		}
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

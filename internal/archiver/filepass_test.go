package archiver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
)

// passExtents reads a file of small and large extents (blocks of small
// ones, chunks of large ones) and hands on every byte of the file in
// order, every stored span its chunks' bytes, a tensor placed again its
// chunk digests; padding must be zeros. spanHasher, handed its batches,
// gives a span of several chunks its whole digest.
func TestPassExtents(t *testing.T) {
	sizes := []struct {
		kind formats.ExtentKind
		size int64
	}{
		{formats.Frame, 100}, {formats.TensorData, 512}, {formats.Zeros, 7}, {formats.TensorData, 6 << 20},
		{formats.TensorData, 300}, {formats.TensorData, 512}, {formats.TensorData, 0}, {formats.Zeros, 1},
		{formats.Zeros, smallExtent + 5}, // read as a chunk of its own
	}
	var f fileWork
	for _, s := range sizes {
		e := formats.Extent{Kind: s.kind, Offset: f.Size, Size: s.size}
		f.Extents = append(f.Extents, e)
		f.Size += s.size
	}
	f.Path = "model.bin"
	data := make([]byte, f.Size)
	r := rand.New(rand.NewPCG(1, 2))
	for _, e := range f.Extents {
		if e.Kind != formats.Zeros {
			for i := e.Offset; i < e.Offset+e.Size; i++ {
				data[i] = byte(r.Uint32())
			}
		}
	}
	copy(data[f.Extents[5].Offset:], data[f.Extents[1].Offset:f.Extents[1].Offset+512]) // extent 5 repeats extent 1

	run := func(data []byte) (map[*span][][]byte, objects.Digest, [][]objects.Digest, []*span, error) {
		stored := make([]*span, len(f.Extents))
		for i, e := range f.Extents {
			if e.Kind != formats.Zeros && i != 5 {
				stored[i] = &span{path: f.Path, off: e.Offset, size: e.Size, chunks: make([]objects.Digest, objects.ChunkCount(e.Size))}
			}
		}
		got := map[*span][][]byte{}
		file := objects.NewHasher()
		again := make([][]objects.Digest, len(f.Extents))
		var storeErr atomic.Pointer[error]
		var h spanHasher
		err := passExtents(context.Background(), bytes.NewReader(data), f, stored, again, &counter{}, &storeErr, newReadBuffers(), func(b batch) {
			file.Write(b.file)
			h.hash(b)
			for _, it := range b.items {
				if len(got[it.s]) <= it.c {
					got[it.s] = append(got[it.s], make([][]byte, it.c+1-len(got[it.s]))...)
				}
				got[it.s][it.c] = bytes.Clone(it.data)
			}
			b.pool.put(b.bp)
		})
		return got, file.Digest(), again, stored, err
	}
	got, fileDigest, again, stored, err := run(data)
	if err != nil {
		t.Fatal(err)
	}
	if fileDigest != objects.Sum(data) {
		t.Error("the bytes handed on are not the file's")
	}
	for i, s := range stored {
		if s == nil || s.size == 0 {
			continue
		}
		if n := len(got[s]); n != objects.ChunkCount(s.size) {
			t.Fatalf("extent %d: %d chunks handed over, want %d", i, n, objects.ChunkCount(s.size))
		}
		for c, b := range got[s] {
			off, n := objects.ChunkBounds(s.size, c)
			if !bytes.Equal(b, data[s.off+off:s.off+off+n]) {
				t.Fatalf("extent %d chunk %d: wrong bytes", i, c)
			}
		}
	}
	if len(got[stored[3]]) != 2 || stored[3].digest != objects.Sum(data[f.Extents[3].Offset:f.Extents[3].Offset+6<<20]) {
		t.Error("a tensor of two chunks has not its whole digest")
	}
	if len(again[5]) != 1 || again[5][0] != objects.Sum(data[f.Extents[1].Offset:f.Extents[1].Offset+512]) {
		t.Errorf("tensor placed again: %v", again[5])
	}

	for _, at := range []int{2, 7, 8} { // padding in a block, after it, in a chunk
		bad := bytes.Clone(data)
		bad[f.Extents[at].Offset] = 1
		if _, _, _, _, err := run(bad); errs.ClassOf(err) != errs.InvalidArchive {
			t.Errorf("non-zero padding in extent %d: %v", at, err)
		}
	}
	if _, _, _, _, err := run(data[:f.Size-3]); errs.ClassOf(err) != errs.InvalidArchive {
		t.Errorf("a short file: %v", err)
	}
}

// procsDuringAdd records GOMAXPROCS each time an add reports progress.
type procsDuringAdd struct {
	mu   sync.Mutex
	seen map[int]bool
}

func (p *procsDuringAdd) Start(int64) {}
func (p *procsDuringAdd) Finish()     {}
func (p *procsDuringAdd) Add(int64) {
	p.mu.Lock()
	p.seen[runtime.GOMAXPROCS(0)] = true
	p.mu.Unlock()
}

// Two files passed at once share the writers: every chunk is stored under
// the digest of its bytes, each span has its whole digest (a span of one
// chunk that chunk's), each file its own; the writers run with Ps of their
// own, given back when the add ends; a failed write fails the add rather
// than leaving a pass waiting.
func TestFilePassesShareTheWriters(t *testing.T) {
	root := t.TempDir()
	r := rand.New(rand.NewPCG(3, 4))
	sizes := []int64{100, 9<<20 + 5, 4 << 20, 300, 2 << 20} // a header, then tensors of 3, 1, 1 and 1 chunks
	l := &formats.Layout{Format: "test"}
	contents := map[string][]byte{}
	for _, name := range []string{"a.bin", "b.bin"} {
		f := formats.File{Path: name}
		for i, n := range sizes {
			e := formats.Extent{Kind: formats.Frame, Offset: f.Size, Size: n}
			if i > 0 {
				e.Kind, e.Tensor = formats.TensorData, len(l.Tensors)
				l.Tensors = append(l.Tensors, formats.Tensor{Name: fmt.Sprintf("%s.%d", name, i), DType: "U8", Shape: []int64{n}, Size: n})
			}
			f.Extents = append(f.Extents, e)
			f.Size += n
		}
		b := make([]byte, f.Size)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		writeFile(t, filepath.Join(root, name), b)
		contents[name] = b
		l.Files = append(l.Files, f)
	}
	run := func(t *testing.T, broken bool) (*hashes, []store.BlobRecord, *store.Store, map[int]bool, error) {
		files := []fileWork{{File: l.Files[0]}, {File: l.Files[1]}}
		st := newStore(t)
		w := st.NewBlobWriter(nil)
		defer w.Abort()
		w.WriteUncached()
		if broken {
			os.RemoveAll(filepath.Join(st.Dir(), "tmp")) // every blob's temp file then fails to open
		}
		pool := newReaderPool(openSource(t, root), nil)
		defer pool.close()
		p := &procsDuringAdd{seen: map[int]bool{}}
		h, err := hashAndStore(context.Background(), pool, l, files, w, Options{Workers: 2, Progress: p})
		if err != nil {
			return nil, nil, nil, p.seen, err
		}
		written, err := w.Commit()
		return h, written, st, p.seen, err
	}

	procs := runtime.GOMAXPROCS(0)
	h, written, st, seen, err := run(t, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int]bool{procs + writersFor([]fileWork{{File: l.Files[0]}, {File: l.Files[1]}}): true}; !maps.Equal(seen, want) {
		t.Errorf("GOMAXPROCS during the add: %v, want %v", seen, want)
	}
	if n := runtime.GOMAXPROCS(0); n != procs {
		t.Errorf("GOMAXPROCS after the add: %d, want %d", n, procs)
	}
	blobs := map[objects.Digest][]byte{}
	for fi, f := range l.Files {
		b := contents[f.Path]
		if h.files[fi].digest != objects.Sum(b) {
			t.Errorf("%s: wrong file digest", f.Path)
		}
		for _, e := range f.Extents[1:] {
			s := h.tensors[e.Tensor]
			if s.digest != objects.Sum(b[e.Offset:e.Offset+e.Size]) {
				t.Errorf("%s: tensor at %d: wrong digest", f.Path, e.Offset)
			}
			for c, d := range s.chunks {
				off, n := objects.ChunkBounds(e.Size, c)
				chunk := b[e.Offset+off : e.Offset+off+n]
				if d != objects.Sum(chunk) {
					t.Errorf("%s: tensor at %d, chunk %d: wrong digest", f.Path, e.Offset, c)
				}
				blobs[d] = chunk
			}
		}
	}
	if len(written) != len(blobs)+2 { // and the two headers, each a frame of one chunk
		t.Errorf("%d blobs written, want %d", len(written), len(blobs)+2)
	}
	for _, rec := range written {
		want, ok := blobs[rec.Digest]
		if !ok {
			continue
		}
		f, err := st.OpenBlob(rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(f)
		f.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("blob %s: %d bytes stored (%v), want its %d", rec.Digest, len(got), err, len(want))
		}
	}

	if _, _, _, _, err := run(t, true); err == nil {
		t.Error("an add whose blobs cannot be written succeeded")
	}
	if n := runtime.GOMAXPROCS(0); n != procs {
		t.Errorf("GOMAXPROCS after a failed add: %d, want %d", n, procs)
	}
}

// A buffer given back, on any goroutine and however it was resliced, is
// the next one lent, whole; none is made while one is free.
func TestBuffersReuse(t *testing.T) {
	b := buffers{size: 64}
	first, second := b.get(), b.get()
	if first == second || len(*first) != 64 || len(*second) != 64 {
		t.Fatalf("two buffers lent at once: %p (%d bytes) and %p (%d bytes)", first, len(*first), second, len(*second))
	}
	done := make(chan struct{})
	go func() {
		*first = (*first)[:3]
		b.put(first)
		close(done)
	}()
	<-done
	if again := b.get(); again != first || len(*again) != 64 {
		t.Errorf("lent %p (%d bytes) after %p was given back, want it whole", again, len(*again), first)
	}
}

// An add has more writers when most of its bytes are in large extents
// (written a chunk at a time) than when they are in small ones.
func TestWritersFor(t *testing.T) {
	file := func(sizes ...int64) fileWork {
		var f formats.File
		for _, n := range sizes {
			f.Extents = append(f.Extents, formats.Extent{Kind: formats.TensorData, Offset: f.Size, Size: n})
			f.Size += n
		}
		return fileWork{File: f}
	}
	for name, c := range map[string]struct {
		files []fileWork
		want  int
	}{
		"no files":               {nil, directWriters},
		"small tensors":          {[]fileWork{file(512, 512, 100<<10)}, directWriters},
		"large tensors":          {[]fileWork{file(100, 4<<20, 9<<20)}, chunkWriters},
		"small bytes outweigh":   {[]fileWork{file(smallExtent), file(slices.Repeat([]int64{smallExtent - 1}, 3)...)}, directWriters},
		"large bytes outweigh":   {[]fileWork{file(3 * smallExtent), file(smallExtent-1, smallExtent-1)}, chunkWriters},
		"half and half is small": {[]fileWork{file(smallExtent, 1024, smallExtent-1024)}, directWriters},
	} {
		if got := writersFor(c.files); got != c.want {
			t.Errorf("%s: %d writers, want %d", name, got, c.want)
		}
	}
}

package archiver

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

// passExtents reads a file of small and large extents (blocks of small
// ones, chunks of large ones) and gives every stored span its chunks'
// bytes, the file its digest, a tensor placed again its chunk digests;
// padding must be zeros. chunkHasher, handed its batches, gives a span of
// several chunks its whole digest.
func TestPassExtents(t *testing.T) {
	sizes := []struct {
		kind formats.ExtentKind
		size int64
	}{
		{formats.Frame, 100}, {formats.TensorData, 512}, {formats.Zeros, 7}, {formats.TensorData, 6 << 20},
		{formats.TensorData, 300}, {formats.TensorData, 512}, {formats.TensorData, 0}, {formats.Zeros, 1},
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

	run := func(data []byte) (map[*span][][]byte, *span, [][]objects.Digest, []*span, error) {
		stored := make([]*span, len(f.Extents))
		for i, e := range f.Extents {
			if e.Kind != formats.Zeros && i != 5 {
				stored[i] = &span{path: f.Path, off: e.Offset, size: e.Size, chunks: make([]objects.Digest, objects.ChunkCount(e.Size))}
			}
		}
		got := map[*span][][]byte{}
		fs := &span{}
		again := make([][]objects.Digest, len(f.Extents))
		var storeErr atomic.Pointer[error]
		var h chunkHasher
		err := passExtents(context.Background(), bytes.NewReader(data), f, fs, stored, again, &counter{}, &storeErr, func(b batch) {
			h.hash(b)
			for _, it := range b.items {
				if len(got[it.s]) <= it.c {
					got[it.s] = append(got[it.s], make([][]byte, it.c+1-len(got[it.s]))...)
				}
				got[it.s][it.c] = bytes.Clone(it.data)
			}
			b.pool.Put(b.bp)
		})
		return got, fs, again, stored, err
	}
	got, fs, again, stored, err := run(data)
	if err != nil {
		t.Fatal(err)
	}
	if fs.digest != objects.Sum(data) {
		t.Error("file digest is not the digest of the file")
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

	for _, at := range []int{2, 7} { // padding in a block, padding at the end
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

package restorer

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

// manySmall is a model of 362 tensors, all but the embedding under a KiB:
// a re-layout reads them in batches.
var manySmall = testmodel.Spec{Layers: 40, Hidden: 16, Vocab: 2048, DType: "F32", Seed: 7}

func TestFetchesOf(t *testing.T) {
	blob := func(size int64) piece { d := objects.Sum([]byte{byte(size)}); return piece{blob: &d, size: size} }
	cast := func(from, to int64) piece {
		return piece{derived: &derived{source: objects.Tensor{Size: from}}, size: to}
	}
	frame := frameOf([]byte("frame"))
	zeros := piece{zeros: true, size: 3}
	small, large := blob(100), blob(batchPiece)
	var full []piece // batchCount+1 small blobs
	for range batchCount + 1 {
		full = append(full, blob(1))
	}
	var heavy []piece // 17 blobs just under batchPiece: 16 make batchBytes
	for range 17 {
		heavy = append(heavy, blob(batchPiece-1))
	}
	tests := []struct {
		name   string
		pieces []piece
		want   [][2]int // each fetch's [start, end) in pieces
	}{
		{"nothing to read", []piece{frame, zeros}, nil},
		{"small blobs with frames between, one batch", []piece{frame, small, frame, small, zeros, small, frame}, [][2]int{{1, 6}}},
		{"a large blob alone, closing the batch", []piece{small, large, small, small}, [][2]int{{0, 1}, {1, 2}, {2, 4}}},
		{"a batch of batchBytes at most", heavy, [][2]int{{0, 16}, {16, 17}}},
		{"small derived pieces batched with blobs", []piece{small, cast(100, 50), frame, small}, [][2]int{{0, 4}}},
		{"a derived piece of a large source alone", []piece{small, cast(batchPiece, 10), small}, [][2]int{{0, 1}, {1, 2}, {2, 3}}},
		{"a batch of batchCount blobs at most", full, [][2]int{{0, batchCount}, {batchCount, batchCount + 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := fetchesOf(tc.pieces)
			if len(got) != len(tc.want) {
				t.Fatalf("%d fetches, want %d", len(got), len(tc.want))
			}
			for i, ft := range got {
				start := -1 // a fetch's pieces are a slice of the file's
				for k := range tc.pieces {
					if &tc.pieces[k] == &ft.pieces[0] {
						start = k
					}
				}
				span := [2]int{start, start + len(ft.pieces)}
				reads, bytes := 0, int64(0)
				for _, pc := range ft.pieces {
					if pc.isRead() {
						reads++
						bytes += pc.readSize()
						if pc.derived != nil {
							bytes += pc.size
						}
					}
				}
				if span != tc.want[i] || ft.reads != reads || ft.bytes != bytes || ft.result == nil {
					t.Fatalf("fetch %d: pieces %v reading %d (counted %d) holding %d (counted %d), want %v", i, span, reads, ft.reads, bytes, ft.bytes, tc.want[i])
				}
			}
		})
	}
}

// planned is the plan of a checkout of version d with opts, and its blobs
// (closed when the test ends).
func planned(t *testing.T, st *store.Store, d objects.Digest, opts Options) (*plan, *blobSource) {
	t.Helper()
	m := manifestOf(t, st, d)
	p, err := makePlan(m, opts, storedFrames(st, m))
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := openBlobs(st, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blobs.Close() })
	return p, blobs
}

// countingSource counts the reads writeFile asks of a blobSource.
type countingSource struct {
	*blobSource
	reads, blobs atomic.Int32
}

func (c *countingSource) read(pcs []piece, buf []byte) ([][]byte, error) {
	out, err := c.blobSource.read(pcs, buf)
	c.reads.Add(1)
	c.blobs.Add(int32(len(out)))
	return out, err
}

// A re-layout of many small tensors reads their blobs a batch at a time
// (one read of the pack and one hashing of eight at once each, not a read
// and a goroutine per blob), and what it writes parses back to the plan.
func TestWriteFileReadsSmallBlobsInBatches(t *testing.T) {
	st, _, d := added(t, manySmall)
	p, blobs := planned(t, st, d, Options{Format: "npz"})
	want := 0
	for _, f := range p.files {
		for _, pc := range f.pieces {
			if pc.isRead() {
				want++
			}
		}
	}
	src := &countingSource{blobSource: blobs}
	root := t.TempDir()
	for _, f := range p.files {
		if err := writeFile(context.Background(), src, f, root, 3, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := int(src.blobs.Load()); got != want || want < 300 {
		t.Fatalf("read %d blobs, the plan has %d", got, want)
	}
	if reads := int(src.reads.Load()); reads > want/50 {
		t.Fatalf("%d reads for %d small blobs: not batched", reads, want)
	}
	if err := verifyRelayout(context.Background(), p, root); err != nil {
		t.Fatal(err)
	}
}

// damage flips a bit in the middle of a packed blob, the first one of the
// digests in want that take is true of.
func damage(t *testing.T, st *store.Store, want []objects.Digest, take func(store.BlobRecord) bool) store.BlobRecord {
	t.Helper()
	recs := map[objects.Digest]store.BlobRecord{}
	err := st.View(func(tx *bolt.Tx) error {
		return store.ForEachBlob(tx, func(r store.BlobRecord) error { recs[r.Digest] = r; return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range want {
		r, ok := recs[d]
		if !ok || r.Encoding != store.EncodingPacked || !take(r) {
			continue
		}
		path := st.PackPath(r.Pack)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[r.Offset+r.Size/2] ^= 0x10
		os.Chmod(path, 0o644)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return r
	}
	t.Fatal("no blob to damage")
	return store.BlobRecord{}
}

// A flipped bit in a blob read for a re-layout, in a batch or alone, as
// it is or cast (--dtype), fails the checkout with integrity_error from
// the read, before anything parses the written file, and leaves nothing
// at the destination.
func TestReadsRefuseDamagedBlobs(t *testing.T) {
	large := testmodel.Spec{Layers: 1, Hidden: 64, Vocab: 20000, DType: "F32", Seed: 5} // an embedding of two chunks
	for _, tc := range []struct {
		name string
		spec testmodel.Spec
		opts Options
		take func(store.BlobRecord) bool
	}{
		{"small blob in a batch", manySmall, Options{Format: "npz"}, func(r store.BlobRecord) bool { return r.Size > 64 && r.Size < batchPiece }},
		{"small blob cast in a batch", manySmall, Options{Format: "npz", WriteOptions: formats.WriteOptions{DType: "f16", Clamp: true}}, func(r store.BlobRecord) bool { return r.Size > 64 && r.Size < batchPiece }},
		{"second chunk of a tensor cast alone", large, Options{WriteOptions: formats.WriteOptions{DType: "f16", Clamp: true}}, func(r store.BlobRecord) bool { return r.Size > 512<<10 && r.Size < objects.ChunkSize }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _, d := added(t, tc.spec)
			m := manifestOf(t, st, d)
			var want []objects.Digest // the second half's chunks
			for _, tn := range m.Tensors {
				want = append(want, tn.Chunks...)
			}
			victim := damage(t, st, want[len(want)/2:], tc.take)
			parent := t.TempDir()
			_, err := Checkout(context.Background(), st, d, filepath.Join(parent, "out"), tc.opts)
			if !errors.Is(err, errs.IntegrityError) || !strings.Contains(err.Error(), "blob "+victim.Digest.Short()+": content hashes to") {
				t.Fatalf("err = %v, want integrity_error from the read of blob %s", err, victim.Digest.Short())
			}
			if left, _ := os.ReadDir(parent); len(left) != 0 {
				t.Fatalf("left behind: %v", left)
			}
		})
	}
}

// A batch that holds coded blobs (grouped, deltas) reads them one at a
// time; the re-layout is still checked tensor by tensor against the
// manifest.
func TestBatchWithCodedBlobs(t *testing.T) {
	st, d, _ := codedStore(t)
	p, blobs := planned(t, st, d, Options{Format: "pytorch"})
	coded := 0
	for _, f := range p.files {
		for _, ft := range fetchesOf(f.pieces) {
			for _, pc := range ft.pieces {
				if rec, err := blobs.record(pc); pc.isRead() && err == nil && rec.Coded() && ft.reads > 1 {
					coded++
				}
			}
		}
	}
	if coded == 0 {
		t.Fatal("no coded blob in a batch: the test does not test that")
	}
	if _, err := Checkout(context.Background(), st, d, filepath.Join(t.TempDir(), "out"), Options{Format: "pytorch"}); err != nil {
		t.Fatal(err)
	}
}

// boundedSource records how many bytes of fetches it holds at once.
type boundedSource struct {
	mu         sync.Mutex
	held, peak int64
}

func (s *boundedSource) read(pcs []piece, buf []byte) ([][]byte, error) {
	var cost int64
	var out [][]byte
	for _, pc := range pcs {
		if pc.isRead() {
			cost += pc.readSize() + pc.size
			out = append(out, make([]byte, pc.size))
		}
	}
	s.mu.Lock()
	s.held += cost
	s.peak = max(s.peak, s.held)
	s.mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	s.mu.Lock()
	s.held -= cost
	s.mu.Unlock()
	return out, nil
}

// Derived pieces (casts) are made ahead of the writer, but no more of
// their bytes at once than fetchBytes; one piece larger than that still
// runs, alone.
func TestFetchesHoldBoundedBytes(t *testing.T) {
	defer func(n int64) { fetchBytes = n }(fetchBytes)
	fetchBytes = 1 << 20
	const n = 300 << 10 // each holds 600 KiB: two would be too many
	f := planFile{path: "f"}
	for i := range 6 {
		size := int64(n)
		if i == 3 {
			size = 2 << 20 // larger than fetchBytes
		}
		f.pieces = append(f.pieces, piece{derived: &derived{source: objects.Tensor{Size: size}}, size: size})
		f.size += size
	}
	src := &boundedSource{}
	if err := writeFile(context.Background(), src, f, t.TempDir(), 4, nil); err != nil {
		t.Fatal(err)
	}
	if src.peak != 4<<20 {
		t.Fatalf("peak %d bytes held, want the large piece's alone", src.peak)
	}
	src.peak = 0
	f.pieces = append(f.pieces[:3], f.pieces[4:]...) // the small ones only
	f.size -= 2 << 20
	if err := writeFile(context.Background(), src, f, filepath.Join(t.TempDir()), 4, nil); err != nil {
		t.Fatal(err)
	}
	if src.peak != 2*n {
		t.Fatalf("peak %d bytes held, want one piece's %d at a time", src.peak, 2*n)
	}
}

// A derived piece whose source is empty (a tensor a converter generates,
// rope_freqs.weight, made by a transform that ignores its input) has no
// chunks to read, alone or in a batch.
func TestReadGeneratedPiece(t *testing.T) {
	st, _, d := added(t, testmodel.Tiny)
	m := manifestOf(t, st, d)
	var made [2]objects.Digest
	gen := func(k int) piece {
		return piece{size: 4, derived: &derived{source: objects.Tensor{Name: "generated", Digest: objects.Sum(nil)},
			transform: func([]byte) ([]byte, error) { return []byte{1, 2, 3, byte(k)}, nil }, digest: &made[k]}}
	}
	small := m.Tensors[1] // a layer norm: one small chunk
	blob := chunkPieces(small.Size, small.Chunks)[0]
	p := &plan{files: []planFile{{path: "alone", pieces: []piece{gen(0)}}, {path: "batch", pieces: []piece{blob, gen(1), blob}}}}
	blobs, err := openBlobs(st, p)
	if err != nil {
		t.Fatal(err)
	}
	defer blobs.Close()
	for k, f := range p.files {
		fts := fetchesOf(f.pieces)
		if len(fts) != 1 {
			t.Fatalf("%s: %d fetches, want 1", f.path, len(fts))
		}
		got, err := blobs.read(fts[0].pieces, nil)
		if err != nil || len(got) != fts[0].reads {
			t.Fatalf("%s: %d pieces, %v", f.path, len(got), err)
		}
		if g := got[k]; !bytes.Equal(g, []byte{1, 2, 3, byte(k)}) || made[k] != objects.Sum(g) {
			t.Fatalf("%s: generated %v, digest %s", f.path, g, made[k].Short())
		}
	}
}

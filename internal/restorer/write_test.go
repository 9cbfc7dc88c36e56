package restorer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

// manySmall is a model of 362 tensors, all but the embedding under a KiB:
// a re-layout reads them in batches.
var manySmall = testmodel.Spec{Layers: 40, Hidden: 16, Vocab: 2048, DType: "F32", Seed: 7}

func TestFetchesOf(t *testing.T) {
	blob := func(size int64) piece { return piece{blob: objects.Sum([]byte{byte(size)}), size: size} }
	frame := piece{literal: []byte("frame"), size: 5}
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
				blobs := 0
				for _, pc := range ft.pieces {
					if pc.isBlob() {
						blobs++
					}
				}
				if span != tc.want[i] || ft.blobs != blobs || ft.result == nil {
					t.Fatalf("fetch %d: pieces %v with %d blobs (counted %d), want %v", i, span, blobs, ft.blobs, tc.want[i])
				}
			}
		})
	}
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
	m := manifestOf(t, st, d)
	p, err := makePlan(m, Options{Format: "npz"}, storedFrames(st, m))
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := openBlobs(st, p)
	if err != nil {
		t.Fatal(err)
	}
	defer blobs.Close()
	want := 0
	for _, f := range p.files {
		for _, pc := range f.pieces {
			if pc.isBlob() {
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

// A flipped bit in a small blob read in a batch fails a re-layout with
// integrity_error, and leaves nothing at the destination.
func TestBatchedReadRefusesDamagedBlob(t *testing.T) {
	st, _, d := added(t, manySmall)
	m := manifestOf(t, st, d)
	tensors := map[objects.Digest]bool{}
	for _, tn := range m.Tensors[len(m.Tensors)/2:] {
		tensors[tn.Digest] = true
	}
	var victim store.BlobRecord
	err := st.View(func(tx *bolt.Tx) error {
		return store.ForEachBlob(tx, func(r store.BlobRecord) error {
			if r.Encoding == store.EncodingPacked && r.Size > 64 && r.Size < batchPiece && tensors[r.Digest] {
				victim = r
			}
			return nil
		})
	})
	if err != nil || victim.Size == 0 {
		t.Fatalf("no packed small blob of a tensor in the model's second half (%v)", err)
	}
	path := st.PackPath(victim.Pack)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[victim.Offset+victim.Size/2] ^= 0x10
	os.Chmod(path, 0o644)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	_, err = Checkout(context.Background(), st, d, filepath.Join(parent, "out"), Options{Format: "npz"})
	// The read refuses it, before anything parses the written file.
	if !errors.Is(err, errs.IntegrityError) || !strings.Contains(err.Error(), "blob "+victim.Digest.Short()+": content hashes to") {
		t.Fatalf("err = %v, want integrity_error from the read of blob %s", err, victim.Digest.Short())
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// A batch that holds coded blobs (grouped, deltas) reads them one at a
// time; the re-layout is still checked tensor by tensor against the
// manifest.
func TestBatchWithCodedBlobs(t *testing.T) {
	st, d, _ := codedStore(t)
	m := manifestOf(t, st, d)
	p, err := makePlan(m, Options{Format: "pytorch"}, storedFrames(st, m))
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := openBlobs(st, p)
	if err != nil {
		t.Fatal(err)
	}
	coded := 0
	for _, f := range p.files {
		for _, ft := range fetchesOf(f.pieces) {
			for _, pc := range ft.pieces {
				if rec, err := blobs.record(pc); pc.isBlob() && err == nil && rec.Coded() && ft.blobs > 1 {
					coded++
				}
			}
		}
	}
	blobs.Close()
	if coded == 0 {
		t.Fatal("no coded blob in a batch: the test does not test that")
	}
	if _, err := Checkout(context.Background(), st, d, filepath.Join(t.TempDir(), "out"), Options{Format: "pytorch"}); err != nil {
		t.Fatal(err)
	}
}

package store

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func tempFiles(t *testing.T, st *Store) []os.DirEntry {
	t.Helper()
	left, err := os.ReadDir(filepath.Join(st.Dir(), tmpDir))
	if err != nil {
		t.Fatal(err)
	}
	return left
}

// A loose blob's file holds exactly the blob, at sizes around the pack
// threshold and the chunk size.
func TestLooseBlobFiles(t *testing.T) {
	st := newStore(t)
	w := st.NewBlobWriter(nil)
	var blobs [][]byte
	for i, n := range []int{PackThreshold, PackThreshold + 1, objects.ChunkSize - 3, objects.ChunkSize} {
		b := randomBytes(n, uint64(i))
		blobs = append(blobs, b)
		if wrote, err := w.Put(objects.Sum(b), b); err != nil || !wrote {
			t.Fatalf("Put = %v, %v", wrote, err)
		}
	}
	if n := len(tempFiles(t, st)); n != len(blobs) {
		t.Fatalf("%d temp files, want %d", n, len(blobs))
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, want := range blobs {
		got, err := os.ReadFile(st.BlobPath(objects.Sum(want)))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("blob file %s: %d bytes, err %v; want its %d bytes", objects.Sum(want).Short(), len(got), err, len(want))
		}
	}
}

// A writer commits once: what it claimed is dropped then, and a blob put
// after is refused, not written nor recorded.
func TestPutAfterCommit(t *testing.T) {
	st := newStore(t)
	w := st.NewBlobWriter(nil)
	b := randomBytes(100, 9)
	if _, err := w.Put(objects.Sum(b), b); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if w.claimed != nil {
		t.Fatal("a committed writer still holds the digests it claimed")
	}
	c := randomBytes(100, 10)
	if wrote, err := w.Put(objects.Sum(c), c); err == nil || wrote {
		t.Fatalf("Put after Commit = %v, %v; want an error", wrote, err)
	}
	if recs, err := w.Commit(); err == nil || len(recs) > 0 {
		t.Fatalf("a second Commit = %d records, %v; want an error", len(recs), err)
	}
	if n := len(tempFiles(t, st)); n != 0 {
		t.Fatalf("%d temp files left", n)
	}
}

// Small blobs gathered in a pack's buffer land at the offsets recorded,
// around and across the buffer's size, beside coded blobs larger than it;
// an aborted batch leaves no temp file.
func TestPackBuffer(t *testing.T) {
	st := newStore(t)
	w := st.NewBlobWriter(nil)
	var blobs [][]byte
	for i, n := range []int{10, packBuffer - 20, 30, PackThreshold - 1, 1, 0, 700 << 10, 700 << 10, 5} {
		blobs = append(blobs, randomBytes(n, uint64(i+10)))
	}
	for _, b := range blobs {
		if _, err := w.Put(objects.Sum(b), b); err != nil {
			t.Fatal(err)
		}
	}
	big := randomBytes(packBuffer+3, 99) // stored as it is, but coded: it goes into the pack whole
	bigRec := BlobRecord{Digest: objects.Sum(big), Size: int64(len(big)), Coding: CodingGrouped}
	if _, err := w.PutStored(bigRec, big); err != nil {
		t.Fatal(err)
	}
	after := randomBytes(40, 100)
	blobs = append(blobs, after)
	if _, err := w.Put(objects.Sum(after), after); err != nil {
		t.Fatal(err)
	}
	recs, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	at := map[objects.Digest]BlobRecord{}
	for _, r := range recs {
		at[r.Digest] = r
	}
	packs := map[PackID][]byte{}
	stored := func(r BlobRecord) []byte {
		if packs[r.Pack] == nil {
			b, err := os.ReadFile(st.PackPath(r.Pack))
			if err != nil {
				t.Fatal(err)
			}
			packs[r.Pack] = b
		}
		return packs[r.Pack][r.Offset : r.Offset+r.StoredSize()]
	}
	for _, b := range append(blobs, big) {
		r, ok := at[objects.Sum(b)]
		if !ok || r.Encoding != EncodingPacked || !bytes.Equal(stored(r), b) {
			t.Fatalf("blob of %d bytes: record %+v (found %v) does not hold it", len(b), r, ok)
		}
	}

	w = st.NewBlobWriter(nil)
	for i := range 3 {
		b := randomBytes(PackThreshold-1, uint64(200+i))
		if _, err := w.Put(objects.Sum(b), b); err != nil {
			t.Fatal(err)
		}
	}
	w.Abort()
	if left := tempFiles(t, st); len(left) != 0 {
		t.Fatalf("temp files left by an abort: %v", left)
	}
}

// Puts on two goroutines write two packs at once: neither waits for the
// other's write to end (a write into a pack that waits for a second write
// to begin would wait forever under one lock). Every blob is then where
// its record says.
func TestPutsWritePacksAtOnce(t *testing.T) {
	g := &writeGate{both: make(chan struct{})}
	st, err := Open(filepath.Join(t.TempDir(), "store"), true, Options{LockTimeout: time.Second, FS: gateFS{g}})
	if err != nil {
		t.Fatal(err)
	}
	w := st.NewBlobWriter(nil)
	defer w.Abort()
	// A small batch takes turns at one pack (TestSmallBatchesShareOnePack):
	// put enough first for packs of their own.
	var first [][]byte
	for k := range packsAtOnceFrom/(packBuffer-100) + 1 {
		b := randomBytes(packBuffer-100, uint64(200+k))
		first = append(first, b)
		if _, err := w.Put(objects.Sum(b), b); err != nil {
			t.Fatal(err)
		}
	}
	g.armed.Store(true)
	var blobs [2][][]byte
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	for i := range blobs {
		for k := range 3 {
			blobs[i] = append(blobs[i], randomBytes(packBuffer-100, uint64(300+10*i+k)))
		}
		wg.Go(func() {
			for _, b := range blobs[i] {
				if _, err := w.Put(objects.Sum(b), b); err != nil {
					errc <- err
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if !g.met.Load() {
		t.Fatal("no two pack writes were in flight at once")
	}
	recs, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	at := map[objects.Digest]BlobRecord{}
	packs := map[PackID]bool{}
	for _, r := range recs {
		at[r.Digest] = r
		packs[r.Pack] = true
	}
	if len(packs) < 2 {
		t.Fatalf("the blobs went into %d pack, want one per goroutine", len(packs))
	}
	for _, b := range append(append(first, blobs[0]...), blobs[1]...) {
		r := at[objects.Sum(b)]
		got, err := os.ReadFile(st.PackPath(r.Pack))
		if err != nil || r.Offset+r.Size > int64(len(got)) || !bytes.Equal(got[r.Offset:r.Offset+r.Size], b) {
			t.Fatalf("blob %s: record %+v does not hold it (%v)", objects.Sum(b).Short(), r, err)
		}
	}
}

// writeGate holds each pack write, once armed, until a second one is in
// flight, or for a few seconds.
type writeGate struct {
	armed atomic.Bool // from the two goroutines' writes on
	n     atomic.Int32
	both  chan struct{}
	once  sync.Once
	met   atomic.Bool
}

func (g *writeGate) write() {
	if !g.armed.Load() {
		return
	}
	if g.n.Add(1) == 2 {
		g.met.Store(true)
		g.once.Do(func() { close(g.both) })
	}
	select {
	case <-g.both:
	case <-time.After(3 * time.Second):
	}
	g.n.Add(-1)
}

type gateFS struct{ g *writeGate }

func (f gateFS) Create(name string) (WritableFile, error) {
	w, err := OSFS{}.Create(name)
	if err != nil || !strings.HasPrefix(filepath.Base(name), "pack-") {
		return w, err
	}
	return gatedFile{w, f.g}, nil
}
func (gateFS) Rename(o, n string) error { return OSFS{}.Rename(o, n) }
func (gateFS) Remove(name string) error { return OSFS{}.Remove(name) }
func (gateFS) MkdirAll(p string) error  { return OSFS{}.MkdirAll(p) }
func (gateFS) SyncFS(dir string) error  { return nil }
func (gateFS) SyncDir(dir string) error { return nil }

type gatedFile struct {
	WritableFile
	g *writeGate
}

func (f gatedFile) Write(p []byte) (int, error) {
	f.g.write()
	return f.WritableFile.Write(p)
}

// Puts on several goroutines of a batch smaller than packsAtOnceFrom take
// turns at one pack: an add of a small model leaves one pack file.
func TestSmallBatchesShareOnePack(t *testing.T) {
	st := newStore(t)
	w := st.NewBlobWriter(nil)
	defer w.Abort()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for k := range 50 {
				b := randomBytes(1000+k, uint64(1000*g+k))
				if _, err := w.Put(objects.Sum(b), b); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	recs, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	packs := map[PackID]bool{}
	for _, r := range recs {
		packs[r.Pack] = true
	}
	if len(recs) != 200 || len(packs) != 1 {
		t.Fatalf("%d records in %d packs, want 200 in one", len(recs), len(packs))
	}
}

// PutSmall writes the blobs of a group that neither the store nor the
// batch has, each once (twice in the group, or already put by Put), in
// one pack, each where its record says; it refuses more than smallGroup
// blobs and blobs of PackThreshold bytes, and answers a committed batch's
// error. Expect, once blobs are claimed, forgets none of them.
func TestPutSmall(t *testing.T) {
	st := newStore(t)
	known := randomBytes(100, 1)
	w := st.NewBlobWriter(nil)
	if _, err := w.Put(objects.Sum(known), known); err != nil {
		t.Fatal(err)
	}
	recs, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	set := &BlobSet{blocks: [][]digestHalf{{halfOf(recs[0].Digest[:])}}}
	w = st.NewBlobWriter(set)
	putFirst := randomBytes(300, 2)
	if _, err := w.Put(objects.Sum(putFirst), putFirst); err != nil {
		t.Fatal(err)
	}
	w.Expect(100) // after a Put: what was claimed stays claimed
	group := [][]byte{randomBytes(0, 3), known, randomBytes(1024, 4), putFirst, randomBytes(PackThreshold-1, 5), randomBytes(7, 6)}
	group = append(group, group[2]) // twice
	ds := make([]objects.Digest, len(group))
	for i, b := range group {
		ds[i] = objects.Sum(b)
	}
	if err := w.PutSmall(ds, group); err != nil {
		t.Fatal(err)
	}
	got, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	want := map[objects.Digest][]byte{objects.Sum(putFirst): putFirst}
	for _, i := range []int{0, 2, 4, 5} {
		want[ds[i]] = group[i]
	}
	if len(got) != len(want) {
		t.Fatalf("%d blobs written, want %d (each new blob once)", len(got), len(want))
	}
	if !slices.IsSortedFunc(got, compareRecords) {
		t.Error("Commit's records are not in key order")
	}
	for _, r := range got {
		b, ok := want[r.Digest]
		if !ok || r.Encoding != EncodingPacked || r.Size != int64(len(b)) {
			t.Fatalf("record %+v: not one of the new blobs", r)
		}
		stored, err := readBlob(st, r)
		if err != nil || !bytes.Equal(stored, b) {
			t.Fatalf("blob %s: %d bytes read (%v), want its %d", r.Digest.Short(), len(stored), err, len(b))
		}
	}

	w = st.NewBlobWriter(nil)
	for _, c := range []struct {
		name  string
		datas [][]byte
	}{
		{"65 blobs", make([][]byte, smallGroup+1)},
		{"a blob of PackThreshold bytes", [][]byte{make([]byte, PackThreshold)}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("PutSmall of %s did not panic", c.name)
				}
			}()
			w.PutSmall(make([]objects.Digest, len(c.datas)), c.datas)
		}()
	}
	w.Abort()
	w = st.NewBlobWriter(nil)
	if err := w.PutSmall(ds[5:6], group[5:6]); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := w.PutSmall(ds[:1], group[:1]); err != errCommitted {
		t.Errorf("PutSmall after Commit: %v, want %v", err, errCommitted)
	}
}

// The snapshot matches digests by their first half (BlobSet): a blob whose
// first 16 bytes match a recorded digest's is not written, and a version
// that needs it is then refused by RequireRecorded, which an add's commit
// asks of every blob it did not write. It is never taken as stored.
func TestKnownByHalfIsCheckedWhole(t *testing.T) {
	st := newStore(t)
	data := randomBytes(700, 9)
	d := objects.Sum(data)
	other := d
	other[31] ^= 1 // the same first half: what the snapshot took as recorded
	w := st.NewBlobWriter(&BlobSet{blocks: [][]digestHalf{{halfOf(other[:])}}})
	defer w.Abort()
	if _, err := w.Put(d, data); err != nil {
		t.Fatal(err)
	}
	recs, err := w.Commit()
	if err != nil || len(recs) != 0 {
		t.Fatalf("Commit: %d records (%v), want none: the blob was taken as recorded", len(recs), err)
	}
	err = st.View(func(tx *bolt.Tx) error { return RequireRecorded(tx, []objects.Digest{d}) })
	if errs.ClassOf(err) != errs.IntegrityError {
		t.Fatalf("RequireRecorded of a blob only its first half matched: %v, want integrity_error", err)
	}
}

package store

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// source writes b to a file and opens it, as an add opens a model file.
func source(t *testing.T, b []byte) *os.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "model.bin")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

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

// A blob copied by the kernel from its source holds the bytes that were
// hashed; one whose source no longer holds them (rewritten after the read)
// is refused with integrity_error and leaves no file; a source shorter than
// the blob is written from memory instead.
func TestPutCopy(t *testing.T) {
	file := randomBytes(3*PackThreshold+77, 1)
	src := source(t, file)
	st := newStore(t)
	w := st.NewBlobWriter(nil)
	chunk := file[77 : 77+2*PackThreshold]
	if wrote, err := w.PutCopy(objects.Sum(chunk), chunk, src, 77); err != nil || !wrote {
		t.Fatalf("PutCopy = %v, %v", wrote, err)
	}

	// The bytes read (and hashed) are not what the file holds at off.
	stale := bytes.Clone(file[:2*PackThreshold])
	stale[PackThreshold+5] ^= 1
	_, err := w.PutCopy(objects.Sum(stale), stale, src, 0)
	if errs.ClassOf(err) != errs.IntegrityError {
		t.Fatalf("a copy that differs from the bytes read: err = %v, want integrity_error", err)
	}

	// Past the end of the source: nothing to copy, the bytes are written.
	tail := randomBytes(PackThreshold+1, 2)
	if wrote, err := w.PutCopy(objects.Sum(tail), tail, src, int64(len(file))-10); err != nil || !wrote {
		t.Fatalf("PutCopy past the end = %v, %v", wrote, err)
	}
	if n := len(tempFiles(t, st)); n != 2 {
		t.Fatalf("%d temp files, want the two blobs stored", n)
	}
	recs, err := w.Commit()
	if err != nil || len(recs) != 2 {
		t.Fatalf("Commit = %v, %v", recs, err)
	}
	for _, want := range [][]byte{chunk, tail} {
		got, err := os.ReadFile(st.BlobPath(objects.Sum(want)))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("blob file %s: %d bytes, err %v; want the %d bytes hashed", objects.Sum(want).Short(), len(got), err, len(want))
		}
	}
	if _, err := os.Stat(st.BlobPath(objects.Sum(stale))); !os.IsNotExist(err) {
		t.Fatalf("the refused blob has a file (%v)", err)
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

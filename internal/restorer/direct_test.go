package restorer

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testenv"
)

// writeAt puts every byte where it belongs whatever the offset's phase,
// the run's length and the buffer's alignment, with O_DIRECT and without
// (a file system that refuses it, from the start or after some writes):
// runs of a chunk and less at offsets off every block boundary, buffers
// from directBuffer and unaligned ones.
func TestDirectFileWritesEveryByte(t *testing.T) {
	dir := t.TempDir()
	testenv.RequireDirectIO(t, dir)
	r := rand.New(rand.NewPCG(5, 6))
	for _, mode := range []string{"direct", "buffered", "refused midway"} {
		p := filepath.Join(dir, "out")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		const size = 24 << 20
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		want := make([]byte, size)
		df := &directFile{out: f}
		if mode != "buffered" {
			df = openDirect(f)
			if df.direct == nil {
				t.Fatal("no O_DIRECT descriptor where the file system has it")
			}
		}
		off := int64(0)
		for i := 0; off < size; i++ {
			n := min(int64(r.IntN(objects.ChunkSize)+1), size-off)
			if i%5 == 0 {
				n = min(int64(r.IntN(3*directAlign)+1), size-off) // shorter than directMin
			}
			bp := store.ChunkScratch.Get().(*[]byte)
			buf := directBuffer(*bp, off)[:n]
			if i%3 == 0 { // not on the output's phase: written buffered
				buf = (*bp)[1 : 1+n]
			}
			for k := range buf {
				buf[k] = byte(r.Uint32())
			}
			copy(want[off:], buf)
			if err := df.writeAt(buf, off); err != nil {
				t.Fatal(err)
			}
			store.ChunkScratch.Put(bp)
			off += n
			if mode == "refused midway" && i == 8 {
				df.refused.Store(true) // as after an EINVAL
			}
		}
		if err := df.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: the file differs from what was written (%v)", mode, err)
		}
	}
}

// A checkout writes the whole blocks of each decoded blob past the page
// cache: after it, no page that lies wholly inside a coded blob's run of
// its output file is in the page cache (with the direct writes removed,
// all of them are).
func TestCheckoutWritesDecodedBlobsUncached(t *testing.T) {
	st, d, _ := codedStore(t)
	out := filepath.Join(t.TempDir(), "out")
	testenv.RequireDirectIO(t, filepath.Dir(out))
	if _, err := Checkout(context.Background(), st, d, out, Options{Workers: 2}); err != nil {
		t.Fatal(err)
	}
	var m *objects.Manifest
	if err := st.View(func(tx *bolt.Tx) (err error) { m, err = st.Manifest(tx, d); return }); err != nil {
		t.Fatal(err)
	}
	inside := 0
	for _, mf := range m.Files {
		f := storedFile(m, mf)
		blobs, err := openBlobs(st, &plan{files: []planFile{f}})
		if err != nil {
			t.Fatal(err)
		}
		jobs, err := copyJobs(blobs, f)
		blobs.Close()
		if err != nil {
			t.Fatal(err)
		}
		pages := testenv.Residency(t, filepath.Join(out, filepath.FromSlash(f.path)))
		for _, j := range jobs {
			lo, hi := (j.off+directAlign-1)/directAlign, (j.off+j.size)/directAlign
			if !j.rec.Coded() || hi-lo < directMin/directAlign {
				continue
			}
			for pg := lo; pg < hi; pg++ {
				inside++
				if pages[pg]&1 != 0 {
					t.Fatalf("%s: page %d, inside the coded blob %s at %d+%d, is in the page cache", f.path, pg, j.rec.Digest.Short(), j.off, j.size)
				}
			}
		}
	}
	if inside == 0 {
		t.Fatal("no coded blob spans a whole page run of directMin: the test checks nothing")
	}
}

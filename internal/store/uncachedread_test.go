package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/testenv"
)

// uncache writes p's pages out and drops them from the page cache.
func uncache(t *testing.T, p string) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// With ReadUncached, loose blobs read into an aligned buffer with room and
// packed blobs of directMin or more at any offset come back byte for byte
// and leave none of their pages in the page cache; into a buffer that
// cannot be read into directly, they are read through the page cache, as
// by a plain reader. Smaller packed blobs (their own pack here) are always
// read through the page cache, where read-ahead serves their neighbours.
func TestReadUncached(t *testing.T) {
	st := newStore(t)
	testenv.RequireDirectIO(t, filepath.Join(st.Dir(), tmpDir))
	blobs := map[objects.Digest][]byte{}
	var recs []BlobRecord
	for i, sizes := range [][]int{
		{objects.ChunkSize, objects.ChunkSize - 5, PackThreshold + 3, directMin, directMin + 4097, PackThreshold - 1},
		{100, 4097, 9000, directMin - 1},
	} {
		w := st.NewBlobWriter(nil)
		for j, n := range sizes {
			b := randomBytes(n, uint64(200+10*i+j))
			blobs[objects.Sum(b)] = b
			if _, err := w.Put(objects.Sum(b), b); err != nil {
				t.Fatal(err)
			}
		}
		written, err := w.Commit()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, written...)
	}
	files := map[string]bool{} // path: read with O_DIRECT where it can be (loose or large)
	for _, rec := range recs {
		if rec.Encoding == EncodingPacked {
			files[st.PackPath(rec.Pack)] = rec.Size >= directMin
		} else {
			files[st.BlobPath(rec.Digest)] = true
		}
	}
	if len(files) < 5 {
		t.Fatalf("%d files, want the loose blobs and two packs", len(files))
	}
	for _, mode := range []string{"aligned", "unaligned", "plain"} {
		for p := range files {
			uncache(t, p)
		}
		r := st.NewBlobReader()
		if mode != "plain" {
			r.ReadUncached()
		}
		for _, rec := range recs {
			buf := make([]byte, 0, objects.ChunkSize+directAlign) // a large allocation starts on a page
			if mode == "unaligned" {
				buf = buf[1:1]
			}
			got, err := r.Read(rec, buf)
			if err != nil || !bytes.Equal(got, blobs[rec.Digest]) {
				t.Fatalf("%s: blob of %d bytes read back: %d bytes, %v", mode, rec.Size, len(got), err)
			}
		}
		r.Close()
		for p, large := range files {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			loose := !strings.HasSuffix(p, ".pack")
			direct := large && (mode == "aligned" || mode == "unaligned" && !loose)
			resident := testenv.ResidentPages(t, p, int(fi.Size()))
			if direct && resident > 0 || !direct && resident == 0 {
				t.Errorf("%s: %s: %d of its %d pages in the page cache", mode, filepath.Base(p), resident, (fi.Size()+directAlign-1)/directAlign)
			}
		}
	}
}

// A loose blob file read with O_DIRECT that is longer or shorter than its
// record, or holds other bytes, is an integrity_error.
func TestReadUncachedRefusesBadFiles(t *testing.T) {
	st := newStore(t)
	testenv.RequireDirectIO(t, filepath.Join(st.Dir(), tmpDir))
	for name, damage := range map[string]func([]byte) []byte{
		"longer":  func(b []byte) []byte { return append(b, 0) },
		"shorter": func(b []byte) []byte { return b[:len(b)-1] },
		"flipped": func(b []byte) []byte { b[len(b)/2] ^= 1; return b },
	} {
		b := randomBytes(objects.ChunkSize-directAlign, uint64(len(name)))
		w := st.NewBlobWriter(nil)
		if _, err := w.Put(objects.Sum(b), b); err != nil {
			t.Fatal(err)
		}
		recs, err := w.Commit()
		if err != nil {
			t.Fatal(err)
		}
		p := st.BlobPath(recs[0].Digest)
		os.Chmod(p, 0o644)
		if err := os.WriteFile(p, damage(bytes.Clone(b)), 0o644); err != nil {
			t.Fatal(err)
		}
		r := st.NewBlobReader()
		r.ReadUncached()
		_, err = r.Read(recs[0], make([]byte, 0, objects.ChunkSize))
		r.Close()
		if !errors.Is(err, errs.IntegrityError) {
			t.Errorf("%s: err = %v, want integrity_error", name, err)
		}
	}
}

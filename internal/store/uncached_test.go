package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/testenv"
)

// alignedCopy returns b's bytes in a buffer that starts on a directAlign
// boundary (or, with off, off bytes past one).
func alignedCopy(b []byte, off int) []byte {
	buf := make([]byte, len(b)+2*directAlign)
	skip := (directAlign - int(uintptr(unsafe.Pointer(&buf[0]))%directAlign)) % directAlign
	out := buf[skip+off : skip+off+len(b)]
	copy(out, b)
	return out
}

// residentPages counts the pages of path's first n bytes in the page cache.
func residentPages(t *testing.T, path string, n int) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (n+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(n), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	resident := 0
	for _, v := range vec {
		resident += int(v & 1)
	}
	return resident
}

// requireDirectIO skips (through testenv) where the store's file system
// has no O_DIRECT, or keeps every page in memory anyway (tmpfs).
func requireDirectIO(t *testing.T, st *Store) {
	t.Helper()
	var fs unix.Statfs_t
	if err := unix.Statfs(st.Dir(), &fs); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(st.Dir(), tmpDir, "probe")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|unix.O_DIRECT, 0o644)
	if err == nil {
		_, err = f.Write(alignedCopy(make([]byte, directAlign), 0))
		f.Close()
		os.Remove(p)
	}
	if errors.Is(err, unix.EINVAL) || fs.Type == unix.TMPFS_MAGIC {
		testenv.Missing(t, "a file system with O_DIRECT under %s", st.Dir())
	}
	if err != nil {
		t.Fatal(err)
	}
}

// With WriteUncached, a raw blob's file holds exactly the blob, whatever
// its length (whole blocks, a partial last one, under one block) or its
// buffer's alignment, and the whole blocks of an aligned buffer never
// went through the page cache; without it, they did.
func TestUncachedBlobFiles(t *testing.T) {
	st := newStore(t)
	requireDirectIO(t, st)
	cases := []struct {
		n, off   int
		uncached bool
	}{
		{objects.ChunkSize, 0, true},
		{objects.ChunkSize - 3, 0, true},
		{PackThreshold + 1, 0, true},
		{PackThreshold + directAlign, 0, true},
		{PackThreshold + 5, 1, true},  // unaligned buffer: through the page cache
		{PackThreshold + 7, 0, false}, // a writer without WriteUncached
	}
	w, plain := st.NewBlobWriter(nil), st.NewBlobWriter(nil)
	w.WriteUncached()
	var blobs [][]byte
	for i, c := range cases {
		b := alignedCopy(randomBytes(c.n, uint64(i)), c.off)
		blobs = append(blobs, b)
		into := w
		if !c.uncached {
			into = plain
		}
		if wrote, err := into.Put(objects.Sum(b), b); err != nil || !wrote {
			t.Fatalf("Put of %d bytes = %v, %v", c.n, wrote, err)
		}
	}
	for _, bw := range []*BlobWriter{w, plain} {
		if _, err := bw.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cases {
		p := st.BlobPath(objects.Sum(blobs[i]))
		head := c.n &^ (directAlign - 1) // whole blocks
		// Before the file is read back below, which caches it.
		resident := residentPages(t, p, head)
		direct := c.uncached && c.off == 0
		switch {
		case direct && resident > 0:
			t.Errorf("blob of %d bytes written uncached: %d of its %d whole pages are in the page cache", c.n, resident, head/directAlign)
		case !direct && resident == 0:
			t.Errorf("blob of %d bytes (buffer offset %d, uncached %v): none of its pages is in the page cache; the check sees nothing", c.n, c.off, c.uncached)
		}
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, blobs[i]) {
			t.Fatalf("blob of %d bytes: its file has %d bytes, err %v", c.n, len(got), err)
		}
	}
	if n := len(tempFiles(t, st)); n != 0 {
		t.Fatalf("%d temp files left", n)
	}
}

// With WriteUncached a pack is written past the page cache but for its
// last partial block, and holds exactly its blobs: small raw ones that
// share a buffer, and coded ones larger than the buffer; without it, its
// pages are cached.
func TestUncachedPacks(t *testing.T) {
	st := newStore(t)
	requireDirectIO(t, st)
	for _, uncached := range []bool{true, false} {
		w := st.NewBlobWriter(nil)
		if uncached {
			w.WriteUncached()
		}
		var raws [][]byte
		for i := range 40 {
			b := randomBytes(1+i*997%(PackThreshold-1), uint64(100+i)) // odd sizes, below PackThreshold
			raws = append(raws, b)
			if _, err := w.Put(objects.Sum(b), b); err != nil {
				t.Fatal(err)
			}
		}
		big := weights(7, 3<<20, 0.02)
		coding, stored := EncodeBlob(big, 2, nil)
		if coding != CodingGrouped || len(stored) <= packBuffer {
			t.Fatalf("coded blob of %d bytes (%s): want grouped and larger than the pack buffer", len(stored), coding)
		}
		if _, err := w.PutStored(BlobRecord{Digest: objects.Sum(big), Size: int64(len(big)), Coding: coding}, stored); err != nil {
			t.Fatal(err)
		}
		recs, err := w.Commit()
		if err != nil {
			t.Fatal(err)
		}
		packs := map[PackID]int64{}
		for _, r := range recs {
			packs[r.Pack] = max(packs[r.Pack], r.Offset+r.StoredSize())
		}
		if len(packs) != 1 {
			t.Fatalf("%d packs, want 1", len(packs))
		}
		for id, size := range packs {
			head := int(size) &^ (directAlign - 1)
			resident := residentPages(t, st.PackPath(id), head)
			if uncached && resident > 0 || !uncached && resident == 0 {
				t.Errorf("uncached %v: %d of the pack's %d whole pages are in the page cache", uncached, resident, head/directAlign)
			}
			if fi, err := os.Stat(st.PackPath(id)); err != nil || fi.Size() != size {
				t.Fatalf("pack of %d bytes: %v, %v", size, fi, err)
			}
		}
		byDigest := map[objects.Digest]BlobRecord{}
		for _, rec := range recs {
			byDigest[rec.Digest] = rec
		}
		r := st.NewBlobReader()
		for _, want := range append(raws, big) {
			got, err := r.Read(byDigest[objects.Sum(want)], nil)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("blob of %d bytes read back: %d bytes, %v", len(want), len(got), err)
			}
		}
		r.Close()
	}
}

package store

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

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

// With WriteUncached, a raw blob's file holds exactly the blob, whatever
// its length (whole blocks, a partial last one, under one block) or its
// buffer's alignment, and the whole blocks of an aligned buffer never
// went through the page cache; without it, they did.
func TestUncachedBlobFiles(t *testing.T) {
	st := newStore(t)
	testenv.RequireDirectIO(t, filepath.Join(st.Dir(), tmpDir))
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
		resident := testenv.ResidentPages(t, p, head)
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
	testenv.RequireDirectIO(t, filepath.Join(st.Dir(), tmpDir))
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
			resident := testenv.ResidentPages(t, st.PackPath(id), head)
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

package store

import (
	"bytes"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"unsafe"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// rawBlobs writes n small blobs (packed, end to end in the writer's
// packs) and two loose ones, and returns their bytes and records.
func rawBlobs(t *testing.T, st *Store, n int) ([][]byte, []BlobRecord) {
	t.Helper()
	w := st.NewBlobWriter(nil)
	var blobs [][]byte
	for i := range n + 2 {
		size := 1 + i*37%3000
		if i >= n {
			size = PackThreshold + i
		}
		b := randomBytes(size, uint64(i)+100)
		blobs = append(blobs, b)
		if _, err := w.Put(objects.Sum(b), b); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	byDigest := map[objects.Digest]BlobRecord{}
	for _, r := range recs {
		byDigest[r.Digest] = r
	}
	out := make([]BlobRecord, len(blobs))
	for i, b := range blobs {
		out[i] = byDigest[objects.Sum(b)]
	}
	return blobs, out
}

// ReadRaw gives each blob its own bytes, whatever the order and repeats
// of the records asked for: packed runs read in one piece are cut at the
// right places.
func TestReadRaw(t *testing.T) {
	st := newStore(t)
	blobs, recs := rawBlobs(t, st, 300)
	rd := st.NewBlobReader()
	defer rd.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, verify := range []bool{false, true} {
		var ask []int
		for range 500 {
			ask = append(ask, rng.IntN(len(recs))) // shuffled, some twice
		}
		ask = append(ask, 0, 1, 2, 3) // and a run in order
		asked := make([]BlobRecord, len(ask))
		for k, i := range ask {
			asked[k] = recs[i]
		}
		got, err := rd.ReadRaw(asked, verify)
		if err != nil {
			t.Fatal(err)
		}
		for k, i := range ask {
			if !bytes.Equal(got[k], blobs[i]) {
				t.Fatalf("verify %v: blob #%d (%d bytes) read as %d other bytes", verify, i, len(blobs[i]), len(got[k]))
			}
		}
	}
	if got, err := rd.ReadRaw(nil, true); err != nil || len(got) != 0 {
		t.Fatalf("ReadRaw of nothing = %d, %v", len(got), err)
	}
	// ReadRawInto reads into the buffer it is given when it is large
	// enough; it is overwritten, batch after batch.
	buf := make([]byte, 0, 1<<20)
	for _, batch := range [][]BlobRecord{recs[:40], recs[100:140]} {
		got, err := rd.ReadRawInto(batch, buf, true)
		if err != nil {
			t.Fatal(err)
		}
		for k, b := range got {
			at, base := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
			if at < base || at+uintptr(len(b)) > base+uintptr(cap(buf)) {
				t.Fatalf("blob %d read outside the buffer given", k)
			}
			if !bytes.Equal(b, blobs[slices.Index(recs, batch[k])]) {
				t.Fatalf("blob %d read wrong", k)
			}
		}
	}
}

// A byte changed in a pack fails the verifying read of the blob that holds
// it, by name, as an integrity_error; a pack gone fails any read of it;
// a coded record is refused.
func TestReadRawRefuses(t *testing.T) {
	st := newStore(t)
	_, recs := rawBlobs(t, st, 50)
	bad := recs[17]
	if bad.Encoding != EncodingPacked {
		t.Fatalf("blob 17 is not packed")
	}
	pack := st.PackPath(bad.Pack)
	data, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	data[bad.Offset+bad.Size/2] ^= 0x40
	os.Chmod(pack, 0o644)
	if err := os.WriteFile(pack, data, 0o644); err != nil {
		t.Fatal(err)
	}
	rd := st.NewBlobReader()
	defer rd.Close()
	_, err = rd.ReadRaw(recs, true)
	if errs.ClassOf(err) != errs.IntegrityError || !bytes.Contains([]byte(err.Error()), []byte(bad.Digest.Short())) {
		t.Fatalf("read of a changed blob: %v; want an integrity_error naming %s", err, bad.Digest.Short())
	}
	if _, err := rd.ReadRaw(recs, false); err != nil {
		t.Fatalf("unverified read: %v; the bytes are there", err)
	}
	coded := recs[3]
	coded.Coding, coded.Stored = CodingGrouped, coded.Size-1
	if _, err := rd.ReadRaw([]BlobRecord{recs[2], coded}, false); errs.ClassOf(err) != errs.IntegrityError {
		t.Fatalf("read of a coded record: %v; want an integrity_error", err)
	}
	rd.Close()
	if err := os.Remove(pack); err != nil {
		t.Fatal(err)
	}
	rd = st.NewBlobReader()
	defer rd.Close()
	if _, err := rd.ReadRaw([]BlobRecord{bad}, false); errs.ClassOf(err) != errs.IntegrityError {
		t.Fatalf("read from a pack gone: %v; want an integrity_error", err)
	}
}

package store

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/objects"
)

// fsck's compact records give back every record as the index holds it
// (loose, packed, byte-grouped, deltas with their bases), and find each
// digest the index records and none it does not: digests at both ends of
// the prefix table, several sharing a prefix, prefixes with none.
func TestFsckRecordsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	digest := func(hi, lo byte) objects.Digest {
		var d objects.Digest
		for i := range d {
			d[i] = byte(rng.Uint32())
		}
		d[0], d[1] = hi, lo
		return d
	}
	packs := []PackID{{1}, {2}, {3}}
	var want []BlobRecord
	var absent []objects.Digest
	for k := range 3000 {
		hi, lo := byte(rng.IntN(8)), byte(rng.IntN(256))
		switch k {
		case 0:
			hi, lo = 0, 0
		case 1:
			hi, lo = 0xff, 0xff
		case 2, 3, 4:
			hi, lo = 0x42, 0x42
		}
		d := digest(hi, lo)
		if k%7 == 0 {
			absent = append(absent, d)
			continue
		}
		size := int64(1 + rng.IntN(4096))
		rec := BlobRecord{Digest: d, Size: size, Encoding: EncodingPacked, Pack: packs[k%3], Offset: int64(rng.IntN(1 << 26))}
		switch k % 5 {
		case 0:
			rec = BlobRecord{Digest: d, Size: PackThreshold + size, Encoding: EncodingRaw}
		case 1:
			rec.Coding, rec.Stored = CodingGrouped, size/2+1
		case 2:
			if len(want) > 0 {
				rec.Coding, rec.Stored, rec.Base = CodingDelta, size/2+1, want[rng.IntN(len(want))].Digest
			}
		case 3:
			if k%2 == 0 { // values beyond 32 bits, which fsck keeps apart
				rec.Offset = 1<<32 + int64(k)
			} else {
				rec = BlobRecord{Digest: d, Size: 1<<32 + size, Encoding: EncodingRaw}
			}
		}
		want = append(want, rec)
	}
	absent = append(absent, digest(0xff, 0xfe), digest(0x80, 0))
	want = append(want, BlobRecord{Digest: digest(0x42, 0x42), Size: 9, Encoding: EncodingPacked, Pack: packs[0], Offset: 7,
		Coding: CodingDelta, Stored: 3, Base: absent[0]}) // a delta whose base is not recorded

	st := newStore(t)
	if err := st.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, want) }); err != nil {
		t.Fatal(err)
	}
	err := st.View(func(tx *bolt.Tx) error {
		recs, err := readRecords(tx.Bucket(bucketBlobs), func(_ []byte, _ objects.Digest, _ BlobRecord, err error) bool { return err == nil })
		if err != nil {
			return err
		}
		if len(recs.list) != len(want) {
			t.Fatalf("%d records read, %d recorded", len(recs.list), len(want))
		}
		for _, w := range want {
			i, ok := recs.find(w.Digest)
			if !ok {
				t.Fatalf("record %s not found", w.Digest.Short())
			}
			if got := recs.record(i); got != w {
				t.Fatalf("record %s: got %+v, want %+v", w.Digest.Short(), got, w)
			}
			if got, want := recs.storedSize(i), w.StoredSize(); got != want {
				t.Fatalf("record %s: stored size %d, want %d", w.Digest.Short(), got, want)
			}
		}
		for _, d := range absent {
			if i, ok := recs.find(d); ok {
				t.Fatalf("%s found at %d, not recorded", d.Short(), i)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// What a bad blob breaks is found by reading the manifests again: each
// version (in key order) and tensor that needs it, at most maxAffects of
// them and a count of the rest.
func TestFsckExplainsBadBlobFromManifestsReadAgain(t *testing.T) {
	st := newStore(t)
	shared := []byte("sixteen bytes ..")
	sd := objects.Sum(shared)
	var versions []objects.Digest
	for v := range 2 {
		w := st.NewBlobWriter(nil)
		own := []byte{byte(v)}
		od := objects.Sum(own)
		if err := w.PutSmall([]objects.Digest{sd, od}, [][]byte{shared, own}); err != nil {
			t.Fatal(err)
		}
		recs, err := w.Commit()
		if err != nil {
			t.Fatal(err)
		}
		m := &objects.Manifest{Schema: objects.ManifestSchema, Format: "safetensors", Files: []objects.File{}}
		m.Tensors = append(m.Tensors, objects.Tensor{Name: "own", DType: "U8", Shape: []int64{1}, Size: 1, Digest: od, Chunks: []objects.Digest{od}})
		for i := range 15 {
			m.Tensors = append(m.Tensors, objects.Tensor{Name: fmt.Sprint("t", i), DType: "U8", Shape: []int64{16}, Size: 16, Digest: sd, Chunks: []objects.Digest{sd}})
		}
		versions = append(versions, recordVersion(t, st, m, recs))
	}
	slices.SortFunc(versions, objects.CompareDigests)
	var rec BlobRecord
	if err := st.View(func(tx *bolt.Tx) (err error) { rec, _, err = Blob(tx, sd); return err }); err != nil {
		t.Fatal(err)
	}
	flip := func() {
		f, err := os.OpenFile(st.PackPath(rec.Pack), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b := make([]byte, 1)
		f.ReadAt(b, rec.Offset)
		b[0] ^= 1
		f.WriteAt(b, rec.Offset)
	}
	os.Chmod(st.PackPath(rec.Pack), 0o644)
	flip()
	r, err := st.Fsck(t.Context(), FsckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	flip()
	if len(r.Corrupt) != 1 || r.Corrupt[0].ID != sd.String() {
		t.Fatalf("corrupt %+v, want blob %s", r.Corrupt, sd.Short())
	}
	var want []string
	for _, v := range versions {
		for i := range 15 {
			want = append(want, fmt.Sprintf("version %s (no name reaches it): tensor \"t%d\"", v.Short(), i))
		}
	}
	want = append(want[:maxAffects], fmt.Sprintf("… and %d more", 30-maxAffects))
	if got := r.Corrupt[0].Affects; !slices.Equal(got, want) {
		t.Fatalf("affects:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(r.Warnings) != 1 { // names were not checked
		t.Errorf("warnings %q", r.Warnings)
	}
	if r, err = st.Fsck(t.Context(), FsckOptions{}); err != nil || !r.OK {
		t.Fatalf("fsck after the bit is flipped back: %+v, %v", r, err)
	}
}

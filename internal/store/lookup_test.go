package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// RecordsInOrder gives each digest asked for its own record, in the order
// asked, whatever the order, spacing and repetition, also for digests that
// share their first 8 bytes (the sort key), and refuses one that is not
// recorded (integrity_error).
func TestRecordsInOrder(t *testing.T) {
	s := newStore(t)
	var recs []BlobRecord
	for i := range 3000 {
		d := objects.Sum(fmt.Append(nil, i))
		if i%10 == 0 { // a run of digests equal in their first 8 bytes
			copy(d[:8], "samehead")
		}
		recs = append(recs, BlobRecord{Digest: d, Size: int64(i), Encoding: EncodingRaw})
	}
	if err := s.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, recs) }); err != nil {
		t.Fatal(err)
	}
	for _, step := range []int{1, 3, 97} { // dense (cursor steps) and sparse (seeks)
		var ds []objects.Digest
		for i := len(recs) - 1; i >= 0; i -= step { // reversed, each twice apart
			ds = append(ds, recs[i].Digest)
		}
		ds = append(ds, ds...)
		err := s.View(func(tx *bolt.Tx) error {
			got, err := RecordsInOrder(tx, ds)
			if err != nil {
				return err
			}
			if len(got) != len(ds) {
				return fmt.Errorf("%d records for %d digests", len(got), len(ds))
			}
			for i, d := range ds {
				if got[i].Digest != d || got[i].Size != recs[got[i].Size].Size || recs[got[i].Size].Digest != d {
					return fmt.Errorf("digest %d (%s): record %+v", i, d.Short(), got[i])
				}
			}
			unknown := append(ds[:len(ds):len(ds)], objects.Sum([]byte("not recorded")))
			if _, err := RecordsInOrder(tx, unknown); !errors.Is(err, errs.IntegrityError) {
				return fmt.Errorf("an unknown blob: %v", err)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
}

// A manifest read in a transaction stays whole after it (store.Manifest
// decodes the index's bytes, or the mapping of its blob file, in place;
// both die when it returns): reading it afterwards neither faults nor
// differs. The second manifest's blob is loose (more than a pack's
// threshold), so it is read through a mapping.
func TestManifestOutlivesItsTransaction(t *testing.T) {
	for _, meta := range []string{"", strings.Repeat("m", PackThreshold)} {
		st := newStore(t)
		m := &objects.Manifest{Schema: objects.ManifestSchema, Format: "safetensors", Files: []objects.File{}}
		if meta != "" {
			m.Meta = map[string]string{"note": meta}
		}
		for i := range 50 {
			data := fmt.Append(nil, "tensor ", i)
			d := objects.Sum(data)
			m.Tensors = append(m.Tensors, objects.Tensor{Name: fmt.Sprint("layer.", i, ".weight"), DType: "F32", Shape: []int64{int64(len(data))},
				Size: int64(len(data)), Digest: d, Chunks: []objects.Digest{d}})
		}
		d, enc, err := m.Digest()
		if err != nil {
			t.Fatal(err)
		}
		var copyRecs []BlobRecord
		if meta != "" {
			if copyRecs, err = st.WriteManifestBlob(d, enc); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Update(func(tx *bolt.Tx) error {
			if err := RecordBlobs(tx, copyRecs); err != nil {
				return err
			}
			return PutManifest(tx, d, enc)
		}); err != nil {
			t.Fatal(err)
		}
		var got *objects.Manifest
		if err := st.View(func(tx *bolt.Tx) (err error) {
			if _, _, stubbed := stub(tx.Bucket(bucketManifests).Get(d[:])); stubbed != (meta != "") {
				t.Fatalf("meta %d bytes: a stub %v", len(meta), stubbed)
			}
			got, err = st.Manifest(tx, d)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		// The index is closed and unmapped now; write to it, too, so that a
		// reused mapping would hold other bytes.
		if err := st.Update(func(tx *bolt.Tx) error {
			return RecordBlobs(tx, []BlobRecord{{Digest: objects.Sum([]byte("x")), Size: 1, Encoding: EncodingRaw}})
		}); err != nil {
			t.Fatal(err)
		}
		if again, err := got.Encode(); err != nil || string(again) != string(enc) {
			t.Fatalf("the manifest read changed after its transaction (err %v)", err)
		}
	}
}

// RecordTableInOrder keeps what RecordsInOrder returns: for blob files,
// packed blobs of two packs and coded blobs (a delta with its base's
// record), each asked for once or twice, At gives the same record.
func TestRecordTableInOrder(t *testing.T) {
	s := newStore(t)
	packs := []PackID{{1}, {2}}
	var recs []BlobRecord
	for i := range 200 {
		r := BlobRecord{Digest: objects.Sum(fmt.Append(nil, "blob ", i)), Size: int64(100 + i)}
		switch i % 4 {
		case 0:
			r.Encoding = EncodingRaw
		case 1, 2:
			r.Encoding, r.Pack, r.Offset = EncodingPacked, packs[i%2], int64(1000*i)
		case 3:
			r.Encoding, r.Pack, r.Offset, r.Coding, r.Stored = EncodingPacked, packs[0], int64(1000*i), CodingGrouped, int64(i)
			if i%8 == 7 { // a delta against the blob before it, a raw one
				r.Coding, r.Base = CodingDelta, recs[i-1].Digest
			}
		}
		recs = append(recs, r)
	}
	if err := s.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, recs) }); err != nil {
		t.Fatal(err)
	}
	var ds []objects.Digest
	for i := len(recs) - 1; i >= 0; i-- {
		ds = append(ds, recs[i].Digest)
	}
	ds = append(ds, ds[:50]...)
	err := s.View(func(tx *bolt.Tx) error {
		want, err := RecordsInOrder(tx, ds)
		if err != nil {
			return err
		}
		table, err := RecordTableInOrder(tx, ds)
		if err != nil {
			return err
		}
		if table.Len() != len(ds) {
			return fmt.Errorf("a table of %d records for %d digests", table.Len(), len(ds))
		}
		for i, d := range ds {
			got, w := table.At(i, d), want[i]
			if (got.BaseRec == nil) != (w.BaseRec == nil) || got.BaseRec != nil && *got.BaseRec != *w.BaseRec {
				return fmt.Errorf("digest %d (%s): base record %v, want %v", i, d.Short(), got.BaseRec, w.BaseRec)
			}
			if got.Coding == CodingDelta && (got.BaseRec == nil || got.BaseRec.Digest != got.Base) {
				return fmt.Errorf("digest %d: a delta without its base's record", i)
			}
			if got.BaseRec, w.BaseRec = nil, nil; got != w {
				return fmt.Errorf("digest %d (%s): %+v, want %+v", i, d.Short(), got, w)
			}
		}
		if _, err := RecordTableInOrder(tx, append(ds[:len(ds):len(ds)], objects.Sum([]byte("not recorded")))); !errors.Is(err, errs.IntegrityError) {
			return fmt.Errorf("an unknown blob: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// LookupRecords and RequireRecorded find every recorded blob whatever the
// order, spacing and repetition of the digests asked for, and refuse one
// that is not recorded (integrity_error).
func TestLookupRecords(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "s"), true, Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var recs []BlobRecord
	for i := range 2000 {
		recs = append(recs, BlobRecord{Digest: objects.Sum(fmt.Append(nil, i)), Size: int64(i), Encoding: EncodingRaw})
	}
	if err := s.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, recs) }); err != nil {
		t.Fatal(err)
	}
	all := func(step int) []objects.Digest {
		var out []objects.Digest
		for i := len(recs) - 1; i >= 0; i -= step { // reversed: not sorted
			out = append(out, recs[i].Digest, recs[i].Digest)
		}
		return out
	}
	for _, step := range []int{1, 3, 97} { // dense (cursor steps) and sparse (seeks)
		ds := all(step)
		err := s.View(func(tx *bolt.Tx) error {
			got, err := LookupRecords(tx, ds)
			if err != nil {
				return err
			}
			if len(got) != (len(recs)+step-1)/step {
				return fmt.Errorf("%d records for %d blobs", len(got), len(ds)/2)
			}
			for _, d := range ds {
				if r, ok := got[d]; !ok || r.Digest != d {
					return fmt.Errorf("blob %s: %+v", d.Short(), r)
				}
			}
			return RequireRecorded(tx, ds)
		})
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		unknown := append(ds, objects.Sum([]byte("not recorded")))
		s.View(func(tx *bolt.Tx) error {
			if _, err := LookupRecords(tx, unknown); !errors.Is(err, errs.IntegrityError) {
				t.Errorf("step %d: an unknown blob: %v", step, err)
			}
			if err := RequireRecorded(tx, unknown); !errors.Is(err, errs.IntegrityError) {
				t.Errorf("step %d: an unknown blob: %v", step, err)
			}
			return nil
		})
	}
}

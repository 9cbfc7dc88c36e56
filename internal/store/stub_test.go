package store

import (
	"errors"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// PutManifestStub records a stub where one can be (a store that keeps
// stubs, the manifest's blob recorded at its size) and refuses, as an
// integrity_error, everywhere the manifest's bytes would be needed.
func TestPutManifestStub(t *testing.T) {
	const size, logical = 1234, 99_000
	d := objects.Sum([]byte("a manifest"))
	blob := BlobRecord{Digest: d, Size: size, Encoding: EncodingRaw}
	put := func(st *Store, recs []BlobRecord, size int64) error {
		return st.Update(func(tx *bolt.Tx) error {
			if err := RecordBlobs(tx, recs); err != nil {
				return err
			}
			return PutManifestStub(tx, d, size, logical)
		})
	}
	refused := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, errs.IntegrityError) {
			t.Errorf("%s: %v, want integrity_error", name, err)
		}
	}

	st := newStore(t)
	if keeps, err := st.KeepsStubs(); err != nil || !keeps {
		t.Fatalf("a new store keeps stubs: %v, %v", keeps, err)
	}
	refused("blob not recorded", put(st, nil, size))
	refused("blob recorded at another size", put(st, []BlobRecord{blob}, size+1))
	if err := put(st, []BlobRecord{blob}, size); err != nil { // the refusal above recorded nothing
		t.Fatalf("blob recorded: %v", err)
	}
	err := st.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketManifests).Get(d[:])
		if len(v) != stubLen || v[0] != stubTag {
			t.Errorf("the index holds %d bytes for the manifest, want a stub", len(v))
		}
		if n, ok := ManifestSize(tx, d); !ok || n != size {
			t.Errorf("manifest size %d (%v), want %d", n, ok, size)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	old := newStore(t)
	if err := old.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyFormat, u64(1)) }); err != nil {
		t.Fatal(err)
	}
	if keeps, err := old.KeepsStubs(); err != nil || keeps {
		t.Fatalf("a format-1 store keeps stubs: %v, %v", keeps, err)
	}
	refused("format 1", put(old, []BlobRecord{blob}, size))
}

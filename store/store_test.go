package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/objects"
)

func newStore(t *testing.T) *Store {
	t.Helper()
	st, err := Open(filepath.Join(t.TempDir(), "store"), true, Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestOpenMissingStoreIsNotFound(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "nothing"), false, Options{})
	if !errors.Is(err, errs.NotFound) {
		t.Fatalf("err = %v, want not_found", err)
	}
}

func TestOpenRefusesOtherFormatVersion(t *testing.T) {
	st := newStore(t)
	err := st.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put([]byte("format"), u64(99)) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(st.Dir(), false, Options{}); !errors.Is(err, errs.UnsupportedVersion) {
		t.Fatalf("err = %v, want unsupported_version", err)
	}
}

func TestBlobWriterCommitsDurableFilesAndDedups(t *testing.T) {
	st := newStore(t)
	data := []byte("tensor bytes")
	d := objects.Sum(data)
	w := st.NewBlobWriter()
	if wrote, err := w.Put(d, data); err != nil || !wrote {
		t.Fatalf("first Put = %v, %v", wrote, err)
	}
	if wrote, _ := w.Put(d, data); wrote {
		t.Fatal("the same blob was written twice in one batch")
	}
	if st.HasBlobFile(d) {
		t.Fatal("blob visible under its final name before Commit")
	}
	recs, err := w.Commit()
	if err != nil || len(recs) != 1 || recs[0].Size != int64(len(data)) {
		t.Fatalf("Commit = %v, %v", recs, err)
	}
	if !st.HasBlobFile(d) {
		t.Fatal("blob missing after Commit")
	}
	if left, _ := os.ReadDir(filepath.Join(st.Dir(), tmpDir)); len(left) != 0 {
		t.Fatalf("temp files left: %v", left)
	}
	if wrote, _ := st.NewBlobWriter().Put(d, data); wrote {
		t.Fatal("a blob the store has was written again")
	}
	got, err := st.ReadBlob(d, int64(len(data)), nil)
	if err != nil || string(got) != string(data) {
		t.Fatalf("ReadBlob = %q, %v", got, err)
	}
}

func TestAbortRemovesTempFiles(t *testing.T) {
	st := newStore(t)
	w := st.NewBlobWriter()
	data := []byte("never committed")
	if _, err := w.Put(objects.Sum(data), data); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if left, _ := os.ReadDir(filepath.Join(st.Dir(), tmpDir)); len(left) != 0 {
		t.Fatalf("temp files left after Abort: %v", left)
	}
	if st.HasBlobFile(objects.Sum(data)) {
		t.Fatal("aborted blob was published")
	}
}

func TestReadBlobDetectsCorruptionAndLoss(t *testing.T) {
	st := newStore(t)
	data := []byte("0123456789abcdef")
	d := objects.Sum(data)
	w := st.NewBlobWriter()
	w.Put(d, data)
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	p := st.BlobPath(d)
	os.Chmod(p, 0o644)
	flipped := append([]byte{}, data...)
	flipped[3] ^= 0x10
	for name, content := range map[string][]byte{"bit flip": flipped, "short": data[:5], "long": append(data, 'x')} {
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := st.ReadBlob(d, int64(len(data)), nil); !errors.Is(err, errs.IntegrityError) {
			t.Fatalf("%s: err = %v, want integrity_error", name, err)
		}
	}
	os.Remove(p)
	if _, err := st.ReadBlob(d, int64(len(data)), nil); !errors.Is(err, errs.IntegrityError) {
		t.Fatalf("missing: err = %v, want integrity_error", err)
	}
}

func TestRecordsAndManifestLookup(t *testing.T) {
	st := newStore(t)
	m := &objects.Manifest{Schema: objects.ManifestSchema, Format: "safetensors", Files: []objects.File{}, Tensors: []objects.Tensor{}}
	d, enc, err := m.Digest()
	if err != nil {
		t.Fatal(err)
	}
	rec := BlobRecord{Digest: objects.Sum([]byte("x")), Size: 1, Encoding: EncodingRaw}
	err = st.Update(func(tx *bolt.Tx) error {
		if err := RecordBlobs(tx, []BlobRecord{rec}); err != nil {
			return err
		}
		return PutManifest(tx, d, enc)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = st.View(func(tx *bolt.Tx) error {
		got, ok, err := Blob(tx, rec.Digest)
		if err != nil || !ok || got != rec {
			t.Fatalf("Blob = %v %v %v", got, ok, err)
		}
		if _, err := Manifest(tx, d); err != nil {
			t.Fatal(err)
		}
		idx := ManifestIndex{Tx: tx}
		for _, prefix := range []string{d.String()[:8], d.String()[:9], d.String()} {
			if got := idx.ManifestsWithPrefix(prefix); len(got) != 1 || got[0] != d {
				t.Fatalf("prefix %s: %v", prefix, got)
			}
		}
		if _, err := Manifest(tx, objects.Sum([]byte("other"))); !errors.Is(err, errs.NotFound) {
			t.Fatalf("unknown manifest: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A command that waits for another's lock gives up after LockTimeout with a
// conflict that says what to do, instead of hanging.
func TestLockTimeoutIsConflict(t *testing.T) {
	st := newStore(t)
	held := make(chan struct{})
	release := make(chan struct{})
	go st.Update(func(*bolt.Tx) error {
		close(held)
		<-release
		return nil
	})
	<-held
	defer close(release)
	short := &Store{dir: st.dir, opts: Options{LockTimeout: 100 * time.Millisecond}}
	start := time.Now()
	err := short.Update(func(*bolt.Tx) error { return nil })
	if !errors.Is(err, errs.Conflict) || time.Since(start) > 5*time.Second {
		t.Fatalf("err = %v after %s, want conflict after ~100ms", err, time.Since(start))
	}
}

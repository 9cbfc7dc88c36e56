package storetest

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/restorer"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

// Spec is a small model with two tensors of 1 MiB (stored as loose blob
// files) and a dozen small ones (packed).
var Spec = testmodel.Spec{Layers: 1, Hidden: 32, Vocab: 8192, DType: "F32"}

// T is what the helpers need of a test; *testing.T and *rapid.T have it.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Model is a model directory written for a test, with its files.
type Model struct {
	Dir   string
	Files map[string][]byte
}

// Variant builds a model of Spec in a directory under root: tensor i takes
// its bytes from seeds[i % len(seeds)], so that variants sharing a seed
// share those tensors (and their blobs).
func Variant(t T, root, name string, seeds ...uint64) Model {
	t.Helper()
	files, err := Spec.BuildWith(func(i int, _ formats.Tensor, b []byte) {
		r := rand.New(rand.NewPCG(seeds[i%len(seeds)], uint64(i)))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	dir := filepath.Join(root, name)
	if err := testmodel.Write(dir, files); err != nil {
		t.Fatalf("%v", err)
	}
	return Model{Dir: dir, Files: files}
}

// Add adds m to st as name and returns the version's digest.
func Add(t T, st *store.Store, m Model, name string) objects.Digest {
	t.Helper()
	res, err := archiver.Add(context.Background(), st, m.Dir, archiver.Options{Name: name})
	if err != nil {
		t.Fatalf("add %s: %v", name, err)
	}
	return res.Digest
}

// Checkout checks version d out into a temp directory and returns its
// files.
func Checkout(st *store.Store, d objects.Digest) (map[string][]byte, error) {
	tmp, err := os.MkdirTemp("", "mstore-checkout-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	dest := filepath.Join(tmp, "out")
	if _, err := restorer.Checkout(context.Background(), st, d, dest, restorer.Options{}); err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	err = filepath.WalkDir(dest, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dest, p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	return out, err
}

// RequireCheckout fails unless version name checks out as m's files.
func RequireCheckout(t T, st *store.Store, name string, m Model) {
	t.Helper()
	d, err := names.Resolve(st, name)
	if err != nil {
		t.Fatalf("resolve %s: %v", name, err)
	}
	got, err := Checkout(st, d)
	if err != nil {
		t.Fatalf("checkout %s: %v", name, err)
	}
	if !SameFiles(got, m.Files) {
		t.Fatalf("checkout %s differs from what was added", name)
	}
}

// SameFiles reports whether two file sets are equal.
func SameFiles(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for p, x := range a {
		if y, ok := b[p]; !ok || !bytes.Equal(x, y) {
			return false
		}
	}
	return true
}

// Fsck runs fsck and fails on an error or on anything missing or corrupt.
func Fsck(t T, st *store.Store, opts store.FsckOptions) *store.FsckReport {
	t.Helper()
	r, err := names.Fsck(context.Background(), st, opts)
	if err != nil {
		t.Fatalf("fsck: %v", err)
	}
	if !r.OK {
		t.Fatalf("fsck: missing %+v\ncorrupt %+v", r.Missing, r.Corrupt)
	}
	return r
}

// BlobRecords returns every blob record of st.
func BlobRecords(t T, st *store.Store) map[objects.Digest]store.BlobRecord {
	t.Helper()
	out := map[objects.Digest]store.BlobRecord{}
	err := st.View(func(tx *bolt.Tx) error {
		return store.ForEachBlob(tx, func(r store.BlobRecord) error { out[r.Digest] = r; return nil })
	})
	if err != nil {
		t.Fatalf("blob records: %v", err)
	}
	return out
}

package restorer

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/safetensors"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

// added stores spec's model and returns the store, the model dir, and the
// version's digest.
func added(t *testing.T, spec testmodel.Spec) (*store.Store, string, objects.Digest) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "store"), true, store.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "model")
	files, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := testmodel.Write(dir, files); err != nil {
		t.Fatal(err)
	}
	res, err := archiver.Add(context.Background(), st, dir, archiver.Options{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	return st, dir, res.Digest
}

func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)], err = os.ReadFile(p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, want, got string) {
	t.Helper()
	a, b := readTree(t, want), readTree(t, got)
	if len(a) != len(b) {
		t.Fatalf("%d files, want %d", len(b), len(a))
	}
	for p, data := range a {
		if !bytes.Equal(b[p], data) {
			t.Fatalf("%s differs", p)
		}
	}
}

type countingProgress struct{ total, done atomic.Int64 }

func (c *countingProgress) Start(n int64) { c.total.Store(n) }
func (c *countingProgress) Add(n int64)   { c.done.Add(n) }
func (c *countingProgress) Finish()       {}

func TestCheckoutIsByteIdentical(t *testing.T) {
	for name, spec := range map[string]testmodel.Spec{
		"sharded": testmodel.Tiny,
		"single":  {Layers: 1, Hidden: 16, Vocab: 64, DType: "BF16", Seed: 7},
		// one tensor of several chunks, so chunk order and whole-tensor
		// digests are exercised
		"multi-chunk": {Layers: 1, Hidden: 64, Vocab: 40000, DType: "F32", Seed: 3},
	} {
		t.Run(name, func(t *testing.T) {
			st, dir, d := added(t, spec)
			dest := filepath.Join(t.TempDir(), "out")
			prog := &countingProgress{}
			res, err := Checkout(context.Background(), st, d, dest, Options{Progress: prog, Workers: 3})
			if err != nil {
				t.Fatal(err)
			}
			sameTree(t, dir, dest)
			if res.Relayout || prog.total.Load() != res.Bytes || prog.done.Load() != res.Bytes {
				t.Fatalf("result %+v, progress %d/%d", res, prog.done.Load(), prog.total.Load())
			}
		})
	}
}

func TestReshardAndSubset(t *testing.T) {
	st, dir, d := added(t, testmodel.Tiny)
	dest := filepath.Join(t.TempDir(), "re")
	res, err := Checkout(context.Background(), st, d, dest, Options{WriteOptions: formats.WriteOptions{MaxShardSize: 10_000}})
	if err != nil {
		t.Fatal(err)
	}
	got := readTree(t, dest)
	if !res.Relayout || got["model.safetensors.index.json"] == nil || got["model-00001-of-00007.safetensors"] == nil {
		var names []string
		for p := range got {
			names = append(names, p)
		}
		sort.Strings(names)
		t.Fatalf("re-sharded files: %v", names)
	}
	if !bytes.Equal(got["tokenizer.json"], readTree(t, dir)["tokenizer.json"]) {
		t.Fatal("other files did not come along")
	}
	// Adding the re-sharded model again gives the same tensors: same digests.
	back, err := archiver.Add(context.Background(), st, dest, archiver.Options{Name: "re"})
	if err != nil {
		t.Fatal(err)
	}
	tensorsOf := func(d objects.Digest) []objects.Tensor {
		var m *objects.Manifest
		st.View(func(tx *bolt.Tx) (err error) { m, err = st.Manifest(tx, d); return })
		return m.Tensors
	}
	a, b := tensorsOf(d), tensorsOf(back.Digest)
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Digest != b[i].Digest {
			t.Fatalf("tensor %d: %s %s vs %s %s", i, a[i].Name, a[i].Digest.Short(), b[i].Name, b[i].Digest.Short())
		}
	}

	sub := filepath.Join(t.TempDir(), "sub")
	res, err = Checkout(context.Background(), st, d, sub, Options{WriteOptions: formats.WriteOptions{Tensors: []string{"model.layers.1.*", "lm_head.weight"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Tensors != 10 {
		t.Fatalf("subset has %d tensors, want 10", res.Tensors)
	}
	if _, err := Checkout(context.Background(), st, d, filepath.Join(t.TempDir(), "none"), Options{WriteOptions: formats.WriteOptions{Tensors: []string{"nothing.*"}}}); !errors.Is(err, errs.NotFound) {
		t.Fatalf("empty selection: %v", err)
	}
	if _, err := Checkout(context.Background(), st, d, filepath.Join(t.TempDir(), "bad"), Options{WriteOptions: formats.WriteOptions{Tensors: []string{"[x"}}}); !errors.Is(err, errs.SchemaError) {
		t.Fatalf("bad pattern: %v", err)
	}
}

// A blob whose bytes changed fails the checkout with integrity_error and
// leaves neither the destination nor a temp directory.
func TestCorruptBlobLeavesNoDestination(t *testing.T) {
	st, _, d := added(t, testmodel.Tiny)
	var m *objects.Manifest
	st.View(func(tx *bolt.Tx) (err error) { m, err = st.Manifest(tx, d); return })
	var rec store.BlobRecord
	st.View(func(tx *bolt.Tx) (err error) { rec, _, err = store.Blob(tx, m.Tensors[3].Chunks[0]); return })
	victim := st.PackPath(rec.Pack)
	os.Chmod(victim, 0o644)
	b, _ := os.ReadFile(victim)
	b[rec.Offset+rec.Size/2] ^= 1
	os.WriteFile(victim, b, 0o644)

	parent := t.TempDir()
	for _, opts := range []Options{{}, {WriteOptions: formats.WriteOptions{MaxShardSize: 20_000}}} {
		_, err := Checkout(context.Background(), st, d, filepath.Join(parent, "out"), opts)
		if !errors.Is(err, errs.IntegrityError) {
			t.Fatalf("err = %v, want integrity_error", err)
		}
		if left, _ := os.ReadDir(parent); len(left) != 0 {
			t.Fatalf("left behind: %v", left)
		}
	}
}

func TestUnsupportedConversionAndCancel(t *testing.T) {
	st, _, d := added(t, testmodel.Tiny)
	parent := t.TempDir()
	if _, err := Checkout(context.Background(), st, d, filepath.Join(parent, "g"), Options{Format: "no-such-format"}); !errors.Is(err, errs.UnsupportedVersion) {
		t.Fatalf("err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Checkout(ctx, st, d, filepath.Join(parent, "c"), Options{}); err == nil {
		t.Fatal("a cancelled checkout succeeded")
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

func TestZeroSizeTensorsAndEmptyFiles(t *testing.T) {
	spec := testmodel.Spec{Layers: 1, Hidden: 8, Vocab: 16, DType: "F32", Seed: 9}
	files, _ := spec.BuildWith(func(i int, tn formats.Tensor, b []byte) {
		for j := range b {
			b[j] = byte(i + j)
		}
	})
	files["empty.txt"] = nil
	zl, err := safetensors.Plan([]formats.Tensor{
		{Name: "empty", DType: "F32", Shape: []int64{0, 4}, Size: 0},
		{Name: "two", DType: "F32", Shape: []int64{2}, Size: 8},
	}, safetensors.PlanOptions{Name: "extra/zero"})
	if err != nil {
		t.Fatal(err)
	}
	var zero []byte
	for _, e := range zl.Files[0].Extents {
		zero = append(zero, e.Bytes...)
	}
	files["extra/zero.safetensors"] = append(zero, make([]byte, 8)...)
	dir := filepath.Join(t.TempDir(), "m")
	testmodel.Write(dir, files)
	st, err := store.Open(filepath.Join(t.TempDir(), "s"), true, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := archiver.Add(context.Background(), st, dir, archiver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "out")
	if _, err := Checkout(context.Background(), st, res.Digest, dest, Options{}); err != nil {
		t.Fatal(err)
	}
	sameTree(t, dir, dest)
}

package archiver

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

func newStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "store"), true, store.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func writeModel(t *testing.T, dir string, spec testmodel.Spec) {
	t.Helper()
	files, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := testmodel.Write(dir, files); err != nil {
		t.Fatal(err)
	}
}

var fixedNow = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

// The manifest is canonical: the same model, moved and renamed, added to
// another store, has the same digest.
func TestSameModelSameDigestFromAnyDirectory(t *testing.T) {
	root := t.TempDir()
	first := filepath.Join(root, "a", "model")
	writeModel(t, first, testmodel.Tiny)
	r1, err := Add(context.Background(), newStore(t), first, Options{Name: "m", Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(root, "elsewhere", "renamed-model")
	os.MkdirAll(filepath.Dir(moved), 0o755)
	if err := os.Rename(first, moved); err != nil {
		t.Fatal(err)
	}
	r2, err := Add(context.Background(), newStore(t), moved, Options{Name: "other/name", Message: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if r1.Digest != r2.Digest {
		t.Fatalf("digests differ: %s vs %s", r1.Digest, r2.Digest)
	}
	if r1.Tensors != len(testmodel.Tiny.Tensors()) || r1.Files != 6 {
		t.Fatalf("result %+v", r1)
	}
}

func TestAddingTwiceWritesNothingNew(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	writeModel(t, dir, testmodel.Tiny)
	st := newStore(t)
	r1, err := Add(context.Background(), st, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Add(context.Background(), st, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r1.Name != "m" || r1.NewBytes == 0 || !r1.Moved {
		t.Fatalf("first add %+v", r1)
	}
	if r2.Digest != r1.Digest || r2.NewBytes != 0 || r2.NewBlobs != 0 || r2.Moved {
		t.Fatalf("second add %+v", r2)
	}
}

func TestRefusals(t *testing.T) {
	root := t.TempDir()
	h5 := filepath.Join(root, "model.h5")
	os.WriteFile(h5, []byte("\x89HDF\r\n\x1a\n"), 0o644)
	engine := filepath.Join(root, "m.engine")
	os.WriteFile(engine, []byte("x"), 0o644)
	empty := filepath.Join(root, "empty")
	os.Mkdir(empty, 0o755)
	text := filepath.Join(root, "notes.txt")
	os.WriteFile(text, []byte("hello"), 0o644)
	linked := filepath.Join(root, "linked")
	writeModel(t, linked, testmodel.Tiny)
	os.WriteFile(filepath.Join(root, "secret"), []byte("outside"), 0o644)
	os.Symlink(filepath.Join(root, "secret"), filepath.Join(linked, "vocab.txt"))
	for _, tc := range []struct {
		path string
		want errs.Class
		says string
	}{
		{h5, errs.UnsupportedVersion, "run code"},
		{engine, errs.UnsupportedVersion, "TensorRT"},
		{empty, errs.NotFound, "no model found in " + empty + " (it is empty; looked for *.safetensors"},
		{text, errs.UnsupportedVersion, "not a model container"},
		{linked, errs.PathTraversal, "symbolic link"},
		{filepath.Join(root, "missing"), errs.NotFound, "does not exist"},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			st := newStore(t)
			_, err := Add(context.Background(), st, tc.path, Options{Name: "x"})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v, want %s saying %q", err, tc.want.Key(), tc.says)
			}
			if entries, _ := os.ReadDir(filepath.Join(st.Dir(), "objects")); len(entries) != 0 {
				t.Fatalf("refused add left blobs: %v", entries)
			}
		})
	}
}

// A Hugging Face cache snapshot's files are links into the repo's blobs/;
// those are followed, and links anywhere else are still refused.
func TestHuggingFaceCacheSnapshot(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "models--acme--tiny")
	snap := filepath.Join(repo, "snapshots", "0123abcd")
	blobs := filepath.Join(repo, "blobs")
	os.MkdirAll(snap, 0o755)
	os.MkdirAll(blobs, 0o755)
	files, _ := testmodel.Tiny.Build()
	for p, b := range files {
		blob := filepath.Join(blobs, objects.Sum(b).String())
		os.WriteFile(blob, b, 0o644)
		if err := os.Symlink(filepath.Join("..", "..", "blobs", filepath.Base(blob)), filepath.Join(snap, p)); err != nil {
			t.Fatal(err)
		}
	}
	st := newStore(t)
	plain := filepath.Join(t.TempDir(), "tiny")
	writeModel(t, plain, testmodel.Tiny)
	want, err := Add(context.Background(), st, plain, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Add(context.Background(), st, snap, Options{Name: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != want.Digest {
		t.Fatalf("snapshot digest %s, plain %s", got.Digest, want.Digest)
	}
	outside := filepath.Join(t.TempDir(), "evil")
	os.WriteFile(outside, []byte("{}"), 0o644)
	os.Symlink(outside, filepath.Join(snap, "extra.json"))
	if _, err := Add(context.Background(), st, snap, Options{Name: "tiny"}); !errors.Is(err, errs.PathTraversal) {
		t.Fatalf("link outside blobs/: err = %v, want path_traversal", err)
	}
}

func TestDTypeMismatch(t *testing.T) {
	bf16 := []objects.Tensor{{Name: "w", DType: "BF16"}, {Name: "ids", DType: "I64"}}
	for _, tc := range []struct {
		config string
		warns  bool
	}{
		{`{"torch_dtype": "bfloat16"}`, false},
		{`{"torch_dtype": "float16"}`, true},
		{`{"dtype": "float32"}`, true},
		{`{"torch_dtype": "torch.bfloat16"}`, false},
		{`{}`, false},
		{`not json`, false},
	} {
		if got := DTypeMismatch([]byte(tc.config), bf16); (got != "") != tc.warns {
			t.Errorf("%s: warning %q", tc.config, got)
		}
	}
	if DTypeMismatch([]byte(`{"torch_dtype":"float16"}`), []objects.Tensor{{DType: "I32"}}) != "" {
		t.Error("warned about a model without floating-point tensors")
	}
}

func TestDefaultName(t *testing.T) {
	for in, want := range map[string]string{
		"/x/Qwen2.5-0.5B/":         "Qwen2.5-0.5B",
		"model.safetensors":        "model",
		"a/b/tiny.SafeTensors":     "tiny",
		"archive.tar.gz":           "archive",
		"/models/.safetensors":     ".safetensors",
		"relative/dir/with.dots.d": "with.dots.d",
	} {
		if got := DefaultName(in); got != want {
			t.Errorf("DefaultName(%q) = %q, want %q", in, got, want)
		}
	}
}

// A stray archive-like file beside another model's weights is kept as an
// opaque file; the same name given alone is refused as a bad archive name.
func TestStrayArchiveNamesInAModelDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	writeModel(t, dir, testmodel.Tiny)
	os.WriteFile(filepath.Join(dir, "eval-logs.tgz"), []byte("not really gzip"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.gz"), []byte("x"), 0o644)
	res, err := Add(context.Background(), newStore(t), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Format != "safetensors" || res.Files != 8 {
		t.Fatalf("result %+v", res)
	}
	_, err = Add(context.Background(), newStore(t), filepath.Join(dir, "eval-logs.tgz"), Options{Name: "x"})
	if !errors.Is(err, errs.InvalidArchive) {
		t.Fatalf("a .tgz given alone: err = %v, want invalid_archive", err)
	}
}

// A Hugging Face repo with SafeTensors weights and a pickle of the same
// model: the SafeTensors model is taken, the pickle kept opaque, with a
// warning that says so.
func TestOtherFormatsBesideTheModelAreKeptWithAWarning(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	writeModel(t, dir, testmodel.Tiny)
	os.WriteFile(filepath.Join(dir, "pytorch_model.bin"), []byte("PK\x03\x04 not parsed"), 0o644)
	os.MkdirAll(filepath.Join(dir, "onnx"), 0o755)
	os.WriteFile(filepath.Join(dir, "onnx", "model.onnx"), []byte("not parsed either"), 0o644)
	res, err := Add(context.Background(), newStore(t), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Format != "safetensors" || len(res.Warnings) != 2 || !strings.Contains(res.Warnings[0]+res.Warnings[1], "pytorch_model.bin is a pytorch file") {
		t.Fatalf("result %+v", res)
	}
}

// The manifest's read-back runs beside the blob writes; an add records
// nothing (no blob, no manifest, no ref) until it has passed, however long
// it takes, and fails with its error.
func TestNothingRecordedBeforeTheReadBack(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	writeModel(t, dir, testmodel.Tiny)
	st := newStore(t)
	defer func(f func([]byte) error) { checkReadBack = f }(checkReadBack)
	checkReadBack = func(b []byte) error {
		time.Sleep(100 * time.Millisecond) // the blobs are committed meanwhile
		return errs.New(errs.IntegrityError, "test", "read-back refused")
	}
	if _, err := Add(context.Background(), st, dir, Options{Name: "m"}); err == nil || !strings.Contains(err.Error(), "read-back refused") {
		t.Fatalf("add: %v, want the read-back's error", err)
	}
	err := st.View(func(tx *bolt.Tx) error {
		n := 0
		store.ForEachBlob(tx, func(store.BlobRecord) error { n++; return nil })
		if _, err := refs.Current(tx, "m"); n != 0 || errs.ClassOf(err) != errs.NotFound {
			t.Fatalf("%d blobs recorded, ref m: %v", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkReadBack = objects.CheckReadBack
	if _, err := Add(context.Background(), st, dir, Options{Name: "m"}); err != nil {
		t.Fatal(err)
	}
}

// A version is committed only with every blob it needs: a blob the store
// had when the add began (and so did not write again) whose record goes
// before the commit fails the add, integrity_error, and the ref is not
// moved.
func TestAddFailsWhenAKnownBlobLeaves(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	writeModel(t, dir, testmodel.Tiny)
	st := newStore(t)
	first, err := Add(context.Background(), st, dir, Options{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var gone store.BlobRecord
	err = st.View(func(tx *bolt.Tx) error {
		m, err := st.Manifest(tx, first.Digest)
		if err != nil {
			return err
		}
		var ok bool
		gone, ok, err = store.Blob(tx, m.Tensors[len(m.Tensors)/2].Digest)
		if !ok && err == nil {
			t.Fatal("a tensor's blob is not recorded")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func(f func([]byte) error) { checkReadBack = f }(checkReadBack)
	checkReadBack = func(b []byte) error { // after the known blobs were taken, before the commit
		if err := st.Update(func(tx *bolt.Tx) error { return store.RemoveBlobRecords(tx, []store.RecordPrint{store.PrintOf(gone)}) }); err != nil {
			t.Error(err)
		}
		return objects.CheckReadBack(b)
	}
	_, err = Add(context.Background(), st, dir, Options{Name: "b"})
	if !errors.Is(err, errs.IntegrityError) {
		t.Fatalf("add: %v, want integrity_error", err)
	}
	err = st.View(func(tx *bolt.Tx) error {
		if _, err := refs.Current(tx, "b"); errs.ClassOf(err) != errs.NotFound {
			t.Fatalf("ref b: %v, want not_found", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// notWritten keeps exactly the needs that no written record names.
func TestNotWritten(t *testing.T) {
	var ds []objects.Digest
	for i := range 10 {
		ds = append(ds, objects.Sum([]byte{byte(i)}))
	}
	objects.SortDigests(ds)
	rec := func(is ...int) []store.BlobRecord {
		var out []store.BlobRecord
		for _, i := range is {
			out = append(out, store.BlobRecord{Digest: ds[i]})
		}
		return out
	}
	for _, c := range []struct {
		written []store.BlobRecord
		want    []int
	}{
		{nil, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{rec(0, 1, 2, 3, 4, 5, 6, 7, 8, 9), nil},
		{rec(0, 3, 9), []int{1, 2, 4, 5, 6, 7, 8}},
		{append(rec(2, 5), store.BlobRecord{Digest: objects.Sum([]byte("other"))}), []int{0, 1, 3, 4, 6, 7, 8, 9}},
	} {
		got := notWritten(slices.Clone(ds), c.written)
		var want []objects.Digest
		for _, i := range c.want {
			want = append(want, ds[i])
		}
		if !slices.Equal(got, want) {
			t.Errorf("written %d records: kept %d of the needs, want %v", len(c.written), len(got), c.want)
		}
	}
}

// The index keeps an added version's logical bytes (what `ls` shows) as
// its manifest's bytes give them.
func TestAddRecordsLogicalBytes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	writeModel(t, dir, testmodel.Tiny)
	st := newStore(t)
	r, err := Add(context.Background(), st, dir, Options{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	err = st.View(func(tx *bolt.Tx) error {
		m, err := st.Manifest(tx, r.Digest)
		if err != nil {
			return err
		}
		enc, err := m.Encode()
		if err != nil {
			return err
		}
		peeked, ok := objects.PeekLogicalBytes(enc)
		if n, kept := store.ManifestLogicalBytes(tx, r.Digest); !ok || !kept || n != peeked || n != r.LogicalBytes || n == 0 {
			t.Errorf("index keeps %d logical bytes (%v); the manifest's bytes give %d (%v), the add said %d", n, kept, peeked, ok, r.LogicalBytes)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An add keeps its manifest's bytes until its commit only where the index
// needs them: a store of format 1 gets them in its index, a store of
// format 2 a stub (the bytes dropped once the blob is written).
func TestAddRecordsManifestBytesOrStub(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	writeModel(t, dir, testmodel.Tiny)
	for _, format := range []uint64{1, 2} {
		st := newStore(t)
		err := st.Update(func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("meta")).Put([]byte("format"), binary.BigEndian.AppendUint64(nil, format))
		})
		if err != nil {
			t.Fatal(err)
		}
		r, err := Add(context.Background(), st, dir, Options{Name: "m"})
		if err != nil {
			t.Fatalf("format %d: %v", format, err)
		}
		err = st.View(func(tx *bolt.Tx) error {
			v := tx.Bucket([]byte("manifests")).Get(r.Digest[:])
			if bytesKept := len(v) > 0 && v[0] == '{'; bytesKept != (format == 1) {
				t.Errorf("format %d: the index holds %d bytes for the manifest (its bytes: %v)", format, len(v), bytesKept)
			}
			_, err := st.Manifest(tx, r.Digest)
			return err
		})
		if err != nil {
			t.Fatalf("format %d: %v", format, err)
		}
	}
}

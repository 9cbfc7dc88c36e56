package restorer

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/mpk"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

// mpkFixture is a valid archive from formats/mpk's fixtures: gzip of stored
// deflate blocks, so not compressed the canonical way.
const mpkFixture = "../formats/mpk/testdata/fixtures/valid.tar.gz"

func addFile(t *testing.T, st *store.Store, path, name string) objects.Digest {
	t.Helper()
	res, err := archiver.Add(context.Background(), st, path, archiver.Options{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return res.Digest
}

func gunzipFile(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The archive checks out as its tar stream, byte for byte, compressed
// canonically: the same bytes every time, and adding the checkout again
// is a fixed point.
func TestCheckoutMPKArchive(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "store"), true, store.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	original, err := os.ReadFile(mpkFixture)
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(t.TempDir(), "model.tar.gz")
	if err := os.WriteFile(in, original, 0o644); err != nil {
		t.Fatal(err)
	}
	d := addFile(t, st, in, "m")

	out := func(d objects.Digest) string {
		dest := filepath.Join(t.TempDir(), "out")
		res, err := Checkout(context.Background(), st, d, dest, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Relayout || res.Files != 1 {
			t.Errorf("result %+v", res)
		}
		return filepath.Join(dest, "model.tar.gz")
	}
	first := out(d)
	if !bytes.Equal(gunzipFile(t, first), gunzipFile(t, in)) {
		t.Fatal("the checked-out tar stream differs from the added one")
	}
	var canonical bytes.Buffer
	w := mpk.NewCanonicalWriter(&canonical)
	w.Write(gunzipFile(t, in))
	w.Close()
	a, _ := os.ReadFile(first)
	if !bytes.Equal(a, canonical.Bytes()) {
		t.Error("the checked-out archive is not the canonical compression of its tar stream")
	}
	if b, _ := os.ReadFile(out(d)); !bytes.Equal(a, b) {
		t.Error("two checkouts differ")
	}

	again := addFile(t, st, first, "m")
	if b, _ := os.ReadFile(out(again)); !bytes.Equal(a, b) {
		t.Error("adding the checkout and checking it out again changed its bytes")
	}
	if addFile(t, st, out(again), "m") != again {
		t.Error("checkout → add is not a fixed point")
	}
}

// --extract writes the tree, every file checked against its member.
func TestExtractMPKArchive(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "store"), true, store.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d := addFile(t, st, mpkFixture, "m")
	dest := filepath.Join(t.TempDir(), "tree")
	res, err := Checkout(context.Background(), st, d, dest, Options{Format: "mpk", WriteOptions: formats.WriteOptions{Extract: true}})
	if err != nil {
		t.Fatal(err)
	}
	got := readTree(t, dest)
	a, err := mpk.Load(bytes.NewReader(must(os.ReadFile(mpkFixture))), mpk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tarStream := gunzipFile(t, mpkFixture)
	if len(got) != len(a.Members) || !res.Relayout {
		t.Errorf("%d files for %d members (%+v)", len(got), len(a.Members), res)
	}
	for _, m := range a.Members {
		if !bytes.Equal(got[m.Target], tarStream[m.Offset:m.Offset+m.Size]) {
			t.Errorf("%s differs from member %s", m.Target, m.Name)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestMPKCheckoutRefusals(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "store"), true, store.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	archive := addFile(t, st, mpkFixture, "m")
	weights := filepath.Join(t.TempDir(), "w")
	files, err := testmodel.Tiny.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := testmodel.Write(weights, files); err != nil {
		t.Fatal(err)
	}
	safetensors := addFile(t, st, weights, "w")
	cases := []struct {
		name  string
		d     objects.Digest
		opts  Options
		class errs.Class
	}{
		{"extract a safetensors model", safetensors, Options{Format: "mpk", WriteOptions: formats.WriteOptions{Extract: true}}, errs.UnsupportedVersion},
		{"an archive from a safetensors model", safetensors, Options{Format: "mpk"}, errs.UnsupportedVersion},
		{"an archive as safetensors", archive, Options{Format: "safetensors"}, errs.UnsupportedVersion},
		{"part of an archive", archive, Options{WriteOptions: formats.WriteOptions{Tensors: []string{"model/*.json"}}}, errs.SchemaError},
		{"part of an extracted archive", archive, Options{Format: "mpk", WriteOptions: formats.WriteOptions{Extract: true, Tensors: []string{"model/*.json"}}}, errs.SchemaError},
		{"an archive re-sharded", archive, Options{WriteOptions: formats.WriteOptions{MaxShardSize: 1 << 20}}, errs.SchemaError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dest := filepath.Join(t.TempDir(), "out")
			_, err := Checkout(context.Background(), st, tc.d, dest, tc.opts)
			if errs.ClassOf(err) != tc.class {
				t.Fatalf("got %v, want %s", err, tc.class.Key())
			}
			if _, err := os.Lstat(dest); err == nil {
				t.Error("a refused checkout left its destination")
			}
		})
	}
}

// The writer encodes a file with an encoding, hashing what it was given;
// an unknown encoding is refused.
func TestWriterEncodes(t *testing.T) {
	root := t.TempDir()
	data := bytes.Repeat([]byte("tar stream "), 1000)
	want := objects.Sum(data)
	f := planFile{path: "a/x.tar.gz", size: int64(len(data)), want: &want, encoding: mpk.Compression,
		pieces: []piece{frameOf(data[:5000]), frameOf(data[5000:])}}
	if err := writeFile(context.Background(), nil, f, root, 1, nil); err != nil {
		t.Fatal(err)
	}
	if got := gunzipFile(t, filepath.Join(root, "a/x.tar.gz")); !bytes.Equal(got, data) {
		t.Error("the encoded file does not decode to the planned bytes")
	}
	f.path, f.encoding = "y.zst", "zstd-someday"
	if err := writeFile(context.Background(), nil, f, root, 1, nil); errs.ClassOf(err) != errs.UnsupportedVersion {
		t.Errorf("unknown encoding: %v", err)
	}
}

// A link planted in the checkout's temp dir (a class folder, or the file
// itself, as a racing process could) cannot lead a write out of it: this is
// the one extraction path (checkout --extract), so MPK's safety tests run
// here.
func TestWriterStaysInItsRoot(t *testing.T) {
	for _, plant := range []string{"etc", "etc/x.json"} {
		parent := t.TempDir()
		root, outside := filepath.Join(parent, "root"), filepath.Join(parent, "outside")
		for _, d := range []string{root, outside, filepath.Join(root, "etc")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if plant == "etc" {
			os.Remove(filepath.Join(root, "etc"))
		}
		if err := os.Symlink(filepath.Join(outside, filepath.Base(plant)), filepath.Join(root, plant)); err != nil {
			t.Fatal(err)
		}
		if plant == "etc" {
			os.Mkdir(filepath.Join(outside, "etc"), 0o755)
		}
		f := planFile{path: "etc/x.json", size: 2, pieces: []piece{frameOf([]byte("{}"))}}
		if err := writeFile(context.Background(), nil, f, root, 1, nil); err == nil {
			t.Errorf("%s: a write followed a link out of its root", plant)
		}
		if entries, _ := os.ReadDir(outside); plant == "etc" && len(entries) != 1 || plant != "etc" && len(entries) != 0 {
			t.Errorf("%s: written outside the root: %v", plant, entries)
		}
		if entries, _ := os.ReadDir(filepath.Join(outside, "etc")); plant == "etc" && len(entries) != 0 {
			t.Errorf("%s: written outside the root: %v", plant, entries)
		}
	}
}

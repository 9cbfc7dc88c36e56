package restorer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/safetensors"
	"github.com/mstore/mstore/internal/modeldir"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

// mixedModel is a model with one raw blob (a 2 MB tensor) and packed ones.
func mixedModel(t *testing.T) (*store.Store, string, objects.Digest, *objects.Manifest) {
	t.Helper()
	tensors := append([]formats.Tensor{{Name: "big", DType: "F32", Shape: []int64{512, 1024}, Size: 2 << 20}},
		testmodel.ManySmall(40, 512)...)
	dir := filepath.Join(t.TempDir(), "model")
	if err := testmodel.WriteTensors(dir, tensors, 0, 7); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "store"), true, store.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	res, err := archiver.Add(context.Background(), st, dir, archiver.Options{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	var m *objects.Manifest
	if err := st.View(func(tx *bolt.Tx) (err error) { m, err = st.Manifest(tx, res.Digest); return }); err != nil {
		t.Fatal(err)
	}
	return st, dir, res.Digest, m
}

// copyStored groups a file's blobs into runs: a raw blob alone, packed
// blobs adjacent in one pack together, zeros apart.
func TestCopyJobs(t *testing.T) {
	st, _, _, m := mixedModel(t)
	f := storedFile(m, *m.File("model.safetensors"))
	blobs, err := openBlobs(st, &plan{files: []planFile{f}})
	if err != nil {
		t.Fatal(err)
	}
	defer blobs.Close()
	jobs, err := copyJobs(blobs, f)
	if err != nil {
		t.Fatal(err)
	}
	var raw, packed, pieces int
	var off int64
	for _, j := range jobs {
		if j.off != off {
			t.Fatalf("job at %d, want %d", j.off, off)
		}
		off += j.size
		pieces += len(j.pieces)
		switch {
		case j.zeros:
		case j.rec.Encoding == store.EncodingRaw:
			raw++
			if len(j.pieces) != 1 {
				t.Errorf("a raw blob's job has %d pieces", len(j.pieces))
			}
		default:
			packed++
		}
	}
	if off != f.size || raw != 1 || pieces != len(f.pieces) {
		t.Fatalf("jobs cover %d of %d bytes, %d raw, %d of %d pieces", off, f.size, raw, pieces, len(f.pieces))
	}
	// The header frame and the 40 small tensors were appended in file
	// order: a few runs, not one job per blob.
	if packed > 3 {
		t.Errorf("%d jobs of packed blobs for 41 adjacent blobs", packed)
	}
}

// Every kind of damage to a raw or packed blob fails the checkout with
// integrity_error and leaves nothing at the destination: each blob
// copied is verified in the output file.
func TestCopyStoredRefusesDamagedBlobs(t *testing.T) {
	damage := map[string]func(b []byte, off, size int64) []byte{
		"bit flip":  func(b []byte, off, size int64) []byte { b[off+size/2] ^= 0x10; return b },
		"truncated": func(b []byte, off, size int64) []byte { return b[:off+size-1] },
		"longer":    func(b []byte, off, size int64) []byte { return append(b, 0) },
	}
	for _, kind := range []store.Encoding{store.EncodingRaw, store.EncodingPacked} {
		for name, hurt := range damage {
			t.Run(map[store.Encoding]string{store.EncodingRaw: "raw", store.EncodingPacked: "packed"}[kind]+"/"+name, func(t *testing.T) {
				st, _, d, m := mixedModel(t)
				var rec store.BlobRecord
				for _, tn := range m.Tensors {
					st.View(func(tx *bolt.Tx) (err error) { rec, _, err = store.Blob(tx, tn.Chunks[0]); return })
					if rec.Encoding == kind {
						break
					}
				}
				victim := st.BlobPath(rec.Digest)
				if kind == store.EncodingPacked {
					victim = st.PackPath(rec.Pack)
				}
				os.Chmod(victim, 0o644)
				b, _ := os.ReadFile(victim)
				if name == "longer" && kind == store.EncodingPacked {
					t.Skip("a pack may hold bytes past a blob") // choice: a longer pack is not damage to the blob
				}
				if err := os.WriteFile(victim, hurt(b, rec.Offset, rec.Size), 0o644); err != nil {
					t.Fatal(err)
				}
				parent := t.TempDir()
				_, err := Checkout(context.Background(), st, d, filepath.Join(parent, "out"), Options{})
				if !errors.Is(err, errs.IntegrityError) {
					t.Fatalf("err = %v, want integrity_error", err)
				}
				if left, _ := os.ReadDir(parent); len(left) != 0 {
					t.Fatalf("left behind: %v", left)
				}
			})
		}
	}
}

// Without copy_file_range (another file system, an old kernel) the bytes
// go through a buffer, and are verified the same way.
func TestCopyBufferedFallback(t *testing.T) {
	dir := t.TempDir()
	src, _ := os.Create(filepath.Join(dir, "src"))
	want := []byte("0123456789abcdef")
	src.Write(want)
	dst, _ := os.Create(filepath.Join(dir, "dst"))
	if err := copyBuffered(src, 4, dst, 2, 10); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "dst"))
	if string(got) != "\x00\x00"+string(want[4:14]) {
		t.Fatalf("got %q", got)
	}
	if err := copyBuffered(src, 10, dst, 0, 10); !errors.Is(err, errs.IntegrityError) {
		t.Fatalf("a short source: %v", err)
	}
}

// The re-hash of a re-laid-out checkout finds a changed byte in a small
// tensor (read with its neighbours) and in a large one.
func TestHashTensorsFindsChangedBytes(t *testing.T) {
	st, _, d, m := mixedModel(t)
	out := filepath.Join(t.TempDir(), "out")
	if _, err := Checkout(context.Background(), st, d, out, Options{}); err != nil {
		t.Fatal(err)
	}
	dir, err := modeldir.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	l, err := safetensors.Codec.Parse(dir, dir.SortedFiles(safetensors.Codec.Claims))
	if err != nil {
		t.Fatal(err)
	}
	if err := hashTensors(context.Background(), dir, l, m.Tensors); err != nil {
		t.Fatalf("a good checkout: %v", err)
	}
	path := filepath.Join(out, "model.safetensors")
	for _, name := range []string{"big", m.Tensors[len(m.Tensors)-1].Name, m.Tensors[len(m.Tensors)/2+1].Name} {
		var e formats.Extent
		for _, x := range l.Files[0].Extents {
			if x.Kind == formats.TensorData && l.Tensors[x.Tensor].Name == name {
				e = x
			}
		}
		os.Chmod(path, 0o644)
		b, _ := os.ReadFile(path)
		b[e.Offset+e.Size-1] ^= 1
		os.WriteFile(path, b, 0o644)
		// The error names the tensor: the small ones are hashed in groups.
		if err := hashTensors(context.Background(), dir, l, m.Tensors); !errors.Is(err, errs.IntegrityError) || !strings.Contains(fmt.Sprint(err), fmt.Sprintf("tensor %q", name)) {
			t.Errorf("tensor %s changed: %v", name, err)
		}
		b[e.Offset+e.Size-1] ^= 1
		os.WriteFile(path, b, 0o644)
	}
}

// A GGUF model of small tensors that padding separates: the runs between
// the pads are gathered in memory (runBuffered), each blob verified there,
// and the file written back byte for byte; a changed packed blob is an
// integrity_error.
func TestCopyBufferedRuns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "model")
	if err := testmodel.WriteTensors(dir, testmodel.ManySmall(60, 500), 0, 3); err != nil {
		t.Fatal(err)
	}
	open := func() *store.Store {
		st, err := store.Open(filepath.Join(t.TempDir(), "store"), true, store.Options{LockTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open()
	res, err := archiver.Add(context.Background(), st, dir, archiver.Options{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	ggufDir := filepath.Join(t.TempDir(), "gguf")
	if _, err := Checkout(context.Background(), st, res.Digest, ggufDir, Options{Format: "gguf"}); err != nil {
		t.Fatal(err)
	}
	st2 := open()
	res2, err := archiver.Add(context.Background(), st2, ggufDir, archiver.Options{Name: "g"})
	if err != nil {
		t.Fatal(err)
	}
	var m *objects.Manifest
	st2.View(func(tx *bolt.Tx) (err error) { m, err = st2.Manifest(tx, res2.Digest); return })
	f := m.File("model.gguf")
	if f == nil {
		t.Fatalf("no model.gguf in %+v", m.Files)
	}
	pf := storedFile(m, *f)
	blobs, err := openBlobs(st2, &plan{files: []planFile{pf}})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := copyJobs(blobs, pf)
	blobs.Close()
	if err != nil {
		t.Fatal(err)
	}
	buffered := 0
	for _, j := range jobs {
		if j.parts != nil {
			buffered++
		}
	}
	if buffered == 0 || len(jobs) > 10 {
		t.Fatalf("%d jobs, %d buffered, for 60 padded tensors", len(jobs), buffered)
	}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := Checkout(context.Background(), st2, res2.Digest, out, Options{}); err != nil {
		t.Fatal(err)
	}
	sameTree(t, ggufDir, out)

	var rec store.BlobRecord
	st2.View(func(tx *bolt.Tx) (err error) { rec, _, err = store.Blob(tx, m.Tensors[30].Chunks[0]); return })
	victim := st2.PackPath(rec.Pack)
	os.Chmod(victim, 0o644)
	b, _ := os.ReadFile(victim)
	b[rec.Offset+3] ^= 0x40
	os.WriteFile(victim, b, 0o644)
	parent := t.TempDir()
	if _, err := Checkout(context.Background(), st2, res2.Digest, filepath.Join(parent, "out"), Options{}); !errors.Is(err, errs.IntegrityError) {
		t.Fatalf("a changed packed blob: %v", err)
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

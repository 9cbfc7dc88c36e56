package restorer

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/repack"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

// codedStore holds a BF16 base and a fine-tune of it (a third of the
// elements' low mantissa bits changed) under one name, repacked: grouped
// blobs and deltas. It returns the fine-tune's digest and files.
func codedStore(t *testing.T) (*store.Store, objects.Digest, map[string][]byte) {
	t.Helper()
	root := t.TempDir()
	st, err := store.Open(filepath.Join(root, "store"), true, store.Options{LockTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	spec := testmodel.Spec{Layers: 1, Hidden: 64, Vocab: 8192, DType: "BF16"}
	var d objects.Digest
	var files map[string][]byte
	for ft := range uint64(2) {
		files, err = spec.BuildWith(testmodel.FineTunedBF16(1, ft))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, "model", string(rune('a'+ft)))
		if err := testmodel.Write(dir, files); err != nil {
			t.Fatal(err)
		}
		res, err := archiver.Add(context.Background(), st, dir, archiver.Options{Name: "m"})
		if err != nil {
			t.Fatal(err)
		}
		d = res.Digest
	}
	if _, res, err := repack.Run(context.Background(), st, repack.Options{}); err != nil || res.Deltas == 0 || res.Grouped == 0 {
		t.Fatalf("repack: %+v, %v: want grouped blobs and deltas", res, err)
	}
	return st, d, files
}

// A file of coded blobs (grouped and deltas) is written by copyStored:
// each coded blob is a job of its own, decoded and verified in memory and
// written at its offset; the files come back bit for bit.
func TestCheckoutDecodesCodedBlobsInPlace(t *testing.T) {
	st, d, files := codedStore(t)
	var m *objects.Manifest
	if err := st.View(func(tx *bolt.Tx) (err error) { m, err = st.Manifest(tx, d); return }); err != nil {
		t.Fatal(err)
	}
	codings := map[store.Coding]int{}
	for _, mf := range m.Files {
		f := storedFile(m, mf)
		blobs, err := openBlobs(st, &plan{files: []planFile{f}})
		if err != nil {
			t.Fatal(err)
		}
		if !copyable(f) {
			t.Errorf("%s is not copyable", f.path)
		}
		jobs, err := copyJobs(blobs, f)
		blobs.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			for _, p := range append([]copyJob{j}, j.parts...) {
				if p.rec.Coded() && (len(p.pieces) != 1 || len(j.parts) > 0) {
					t.Fatalf("%s: a coded blob in a job of %d pieces, %d parts", f.path, len(p.pieces), len(j.parts))
				}
				codings[p.rec.Coding]++
			}
		}
	}
	if codings[store.CodingGrouped] == 0 || codings[store.CodingDelta] == 0 {
		t.Fatalf("jobs by coding %v: want grouped blobs and deltas", codings)
	}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := Checkout(context.Background(), st, d, out, Options{Workers: 3}); err != nil {
		t.Fatal(err)
	}
	for p, want := range files {
		if got, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(p))); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s differs after checkout (%v)", p, err)
		}
	}
}

// A flipped bit in the stored bytes of a grouped blob, of a delta, or of a
// delta's base fails the checkout with integrity_error and leaves nothing
// at the destination.
func TestCheckoutRefusesDamagedCodedBlobs(t *testing.T) {
	for _, victim := range []string{"grouped", "delta", "base"} {
		t.Run(victim, func(t *testing.T) {
			st, d, _ := codedStore(t)
			var m *objects.Manifest
			recs := map[objects.Digest]store.BlobRecord{}
			err := st.View(func(tx *bolt.Tx) (err error) {
				if m, err = st.Manifest(tx, d); err != nil {
					return err
				}
				return store.ForEachBlob(tx, func(r store.BlobRecord) error { recs[r.Digest] = r; return nil })
			})
			if err != nil {
				t.Fatal(err)
			}
			var rec store.BlobRecord
			var used []objects.Digest // every blob of the fine-tune's files
			for _, mf := range m.Files {
				for _, pc := range storedFile(m, mf).pieces {
					if pc.frame == nil && !pc.zeros {
						used = append(used, *pc.blob)
					}
				}
			}
			for _, u := range used {
				r := recs[u]
				switch {
				case victim == "grouped" && r.Coding == store.CodingGrouped,
					victim == "delta" && r.Coding == store.CodingDelta:
					rec = r
				case victim == "base" && r.Coding == store.CodingDelta:
					rec = recs[r.Base]
				}
				if rec.Stored > 0 {
					break
				}
			}
			if rec.Stored == 0 {
				t.Fatalf("no %s blob in the fine-tune", victim)
			}
			path := st.PackPath(rec.Pack)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[rec.Offset+rec.Stored/2] ^= 0x10
			os.Chmod(path, 0o644)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			parent := t.TempDir()
			_, err = Checkout(context.Background(), st, d, filepath.Join(parent, "out"), Options{})
			if !errors.Is(err, errs.IntegrityError) {
				t.Fatalf("err = %v, want integrity_error", err)
			}
			if left, _ := os.ReadDir(parent); len(left) != 0 {
				t.Fatalf("left behind: %v", left)
			}
		})
	}
}

package store_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/store/storetest"
)

// An added version's manifest is kept once, as its blob: the index holds
// a stub that gives its size and logical bytes, and its bytes are read
// (and checked) from the blob. A flipped byte of that blob is an
// integrity_error that fsck reports against the manifest. A manifest
// recorded without its blob (a store written before stubs) keeps its
// bytes in the index and reads the same.
func TestManifestBytesLiveInTheirBlob(t *testing.T) {
	root := t.TempDir()
	st := openWith(t, filepath.Join(root, "store"), nil)
	d := storetest.Add(t, st, storetest.Variant(t, root, "v", 1), "v")

	var rec store.BlobRecord
	var encoded []byte
	err := st.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket([]byte("manifests")).Get(d[:]); len(v) > 64 {
			t.Errorf("the index holds %d bytes for the manifest, want a stub", len(v))
		}
		var err error
		if encoded, err = st.ManifestBytes(tx, d); err != nil {
			return err
		}
		var ok bool
		if rec, ok, err = store.Blob(tx, d); err != nil || !ok {
			t.Fatalf("the manifest's blob: %v %v", ok, err)
		}
		m, err := objects.DecodeManifest(encoded)
		if err != nil {
			return err
		}
		if size, ok := store.ManifestSize(tx, d); !ok || size != int64(len(encoded)) || size != rec.Size {
			t.Errorf("ManifestSize = %d %v; the bytes are %d, the blob %d", size, ok, len(encoded), rec.Size)
		}
		if n, ok := store.ManifestLogicalBytes(tx, d); !ok || n != m.LogicalBytes() {
			t.Errorf("ManifestLogicalBytes = %d %v, want %d", n, ok, m.LogicalBytes())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if objects.Sum(encoded) != d {
		t.Fatal("the manifest's bytes do not hash to its digest")
	}

	// A manifest larger than a chunk (a model of 19,500 tensors has one of
	// 5.8 MB) is one loose blob, which fsck takes as it is.
	big := &objects.Manifest{Schema: objects.ManifestSchema, Format: "safetensors", Files: []objects.File{}, Tensors: []objects.Tensor{},
		Meta: map[string]string{"note": strings.Repeat("m", objects.ChunkSize+1)}}
	bd, benc, err := big.Digest()
	if err != nil {
		t.Fatal(err)
	}
	recs, err := st.WriteManifestBlob(bd, benc)
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(func(tx *bolt.Tx) error {
		if err := store.RecordBlobs(tx, recs); err != nil {
			return err
		}
		return store.PutManifest(tx, bd, benc)
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := storetest.Fsck(t, st, store.FsckOptions{}); r.Manifests != 2 {
		t.Fatalf("fsck checked %d manifests, want 2", r.Manifests)
	}

	// An older store's manifest: bytes in the index, no blob.
	old := &objects.Manifest{Schema: objects.ManifestSchema, Format: "safetensors", Files: []objects.File{}, Tensors: []objects.Tensor{}}
	od, oenc, err := old.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(func(tx *bolt.Tx) error { return store.PutManifest(tx, od, oenc) }); err != nil {
		t.Fatal(err)
	}
	err = st.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket([]byte("manifests")).Get(od[:]); !bytes.Equal(v, oenc) {
			t.Errorf("a manifest without its blob: the index holds %q, want its bytes", v)
		}
		got, err := st.ManifestBytes(tx, od)
		if err == nil && !bytes.Equal(got, oenc) {
			t.Errorf("ManifestBytes = %q, want %q", got, oenc)
		}
		if n, ok := store.ManifestLogicalBytes(tx, od); !ok || n != 0 {
			t.Errorf("ManifestLogicalBytes of the older form = %d %v, want 0 true", n, ok)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	path, off := st.BlobPath(d), int64(len(encoded)/2)
	if rec.Encoding == store.EncodingPacked {
		path, off = st.PackPath(rec.Pack), rec.Offset+off
	}
	flipBit(t, path, off)
	err = st.View(func(tx *bolt.Tx) error { _, err := st.Manifest(tx, d); return err })
	if !errors.Is(err, errs.IntegrityError) {
		t.Fatalf("a manifest whose blob is flipped: err = %v, want integrity_error", err)
	}
	r, err := st.Fsck(context.Background(), store.FsckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var manifest, blob bool
	for _, f := range r.Corrupt {
		manifest = manifest || f.Kind == "manifest" && f.ID == d.String()
		blob = blob || f.Kind == "blob" && f.ID == d.String() && len(f.Affects) == 1 && strings.Contains(f.Affects[0], "the manifest itself")
	}
	if !manifest || !blob {
		t.Fatalf("fsck did not report the manifest (%v) and its blob as the version's (%v): %+v", manifest, blob, r.Corrupt)
	}
}

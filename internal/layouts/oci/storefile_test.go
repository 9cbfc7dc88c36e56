package oci

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

// mixedVersion adds a SafeTensors model of a tensor of two chunks between
// 300 small ones and returns the store, the file's bytes and the version.
func mixedVersion(t *testing.T) (*store.Store, []byte, *store.Version) {
	t.Helper()
	tensors := testmodel.ManySmall(300, 512)
	tensors = append(tensors[:150:150], append([]formats.Tensor{{Name: "big", DType: "F32", Shape: []int64{5 << 18}, Size: 5 << 20}}, tensors[150:]...)...)
	dir := filepath.Join(t.TempDir(), "model")
	if err := testmodel.WriteTensors(dir, tensors, 0, 3); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	st := newStore(t)
	res, err := archiver.Add(context.Background(), st, dir, archiver.Options{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	v, lock, err := st.ReadVersion(res.Digest, false)
	if err != nil {
		t.Fatal(err)
	}
	lock.Unlock()
	return st, want, v
}

// readAllBy reads r to its end with reads of n bytes.
func readAllBy(r io.Reader, n int) ([]byte, error) {
	var out []byte
	p := make([]byte, n)
	for {
		k, err := r.Read(p)
		out = append(out, p[:k]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// A file read out of the store, small blobs a batch at a time, is the
// file as added, whatever the size of the reads.
func TestOpenFileReadsTheFile(t *testing.T) {
	st, want, v := mixedVersion(t)
	f := v.Manifest.File("model.safetensors")
	for _, n := range []int{1, 100, 4096, 1 << 20, 8 << 20} {
		r := OpenFile(st, v.Manifest, f, v.Records)
		got, err := readAllBy(r, n)
		r.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("reads of %d bytes: %d bytes (%v), want the file's %d", n, len(got), err, len(want))
		}
	}
}

// A flipped bit in a small blob read in a batch is an integrity_error
// that names it.
func TestOpenFileRefusesDamagedBlob(t *testing.T) {
	st, _, v := mixedVersion(t)
	victim := v.Records[v.Manifest.Tensors[200].Digest]
	if victim.Encoding != store.EncodingPacked || victim.Size != 512 {
		t.Fatalf("tensor 200's blob: %+v, want a packed one of 512 bytes", victim)
	}
	path := st.PackPath(victim.Pack)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[victim.Offset+100] ^= 1
	os.Chmod(path, 0o644)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r := OpenFile(st, v.Manifest, v.Manifest.File("model.safetensors"), v.Records)
	defer r.Close()
	_, err = io.ReadAll(r)
	if !errors.Is(err, errs.IntegrityError) || !strings.Contains(err.Error(), victim.Digest.Short()) {
		t.Fatalf("err = %v, want integrity_error naming blob %s", err, victim.Digest.Short())
	}
}

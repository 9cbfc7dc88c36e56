package store

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/mstore/mstore/internal/errs"
)

// A mapped blob gets use the bytes checked; a flipped bit, a file cut
// short or made longer, or a missing file is an integrity_error before
// use runs, and a file cut short while use reads the mapping is one too,
// not a crash.
func TestReadMappedChecksAndSurvivesTruncation(t *testing.T) {
	data := bytes.Repeat([]byte("a mapped chunk of a tensor. "), 2*PackThreshold/28)
	st := newStore(t)
	rec := commit(t, st, data)[0]
	if rec.Encoding != EncodingRaw || rec.Size < mapMin {
		t.Fatalf("the blob is %v of %d bytes: not one ReadMapped maps", rec.Encoding, rec.Size)
	}
	r := st.NewBlobReader()
	defer r.Close()
	calls := 0
	err := r.ReadMapped(rec, nil, func(b []byte) error {
		calls++
		if !bytes.Equal(b, data) {
			t.Error("use got other bytes")
		}
		return nil
	})
	if err != nil || calls != 1 {
		t.Fatalf("err = %v, %d calls of use", err, calls)
	}
	want := errors.New("use's own error")
	if err := r.ReadMapped(rec, nil, func([]byte) error { return want }); err != want {
		t.Fatalf("err = %v, want use's", err)
	}

	path := st.BlobPath(rec.Digest)
	os.Chmod(path, 0o644)
	flipped := bytes.Clone(data)
	flipped[len(flipped)/2] ^= 0x10
	for name, content := range map[string][]byte{"bit flip": flipped, "short": data[:len(data)-1], "long": append(bytes.Clone(data), 'x')} {
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		err := r.ReadMapped(rec, nil, func([]byte) error { t.Errorf("%s: use ran", name); return nil })
		if !errors.Is(err, errs.IntegrityError) {
			t.Fatalf("%s: err = %v, want integrity_error", name, err)
		}
	}

	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	err = r.ReadMapped(rec, nil, func(b []byte) error {
		if err := os.Truncate(path, 0); err != nil {
			t.Fatal(err)
		}
		mappedSink = b[len(b)-1] + b[len(b)/2] // pages past the file's end now
		t.Error("the mapping past the file's end read without a fault")
		return nil
	})
	if !errors.Is(err, errs.IntegrityError) {
		t.Fatalf("cut short while mapped: err = %v, want integrity_error", err)
	}

	os.Remove(path)
	if err := r.ReadMapped(rec, nil, func([]byte) error { return nil }); !errors.Is(err, errs.IntegrityError) {
		t.Fatalf("missing: err = %v, want integrity_error", err)
	}
}

var mappedSink byte

// A blob ReadMapped does not map (packed, small) is read and checked as
// Read does.
func TestReadMappedReadsWhatItDoesNotMap(t *testing.T) {
	st := newStore(t)
	rec := commit(t, st, []byte("neighbour"), small)[1]
	r := st.NewBlobReader()
	defer r.Close()
	if err := r.ReadMapped(rec, nil, func(b []byte) error {
		if !bytes.Equal(b, small) {
			t.Error("use got other bytes")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	f, _ := os.ReadFile(st.PackPath(rec.Pack))
	f[rec.Offset+1] ^= 1
	os.Chmod(st.PackPath(rec.Pack), 0o644)
	os.WriteFile(st.PackPath(rec.Pack), f, 0o644)
	r2 := st.NewBlobReader()
	defer r2.Close()
	if err := r2.ReadMapped(rec, nil, func([]byte) error { return nil }); !errors.Is(err, errs.IntegrityError) {
		t.Fatalf("err = %v, want integrity_error", err)
	}
}

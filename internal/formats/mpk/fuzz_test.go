package mpk_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/mpk"
	"github.com/mstore/mstore/internal/formats/mpk/mpktest"
)

// FuzzLoad loads data as an archive: when gz is false data is the tar
// stream and is gzipped first (so the fuzzer mutates tar headers, not
// checksums), else data is the .tar.gz itself. Every input is loaded with
// extraction into a fresh root, under small limits.
//
// Whatever the bytes: no panic; every error has a class and leaves the
// root empty; an accepted archive's layout covers its tar stream exactly,
// and the root holds exactly its members' bytes at their targets.
func FuzzLoad(f *testing.F) {
	for _, fx := range fixtures() {
		if tarStream, err := gunzipAll(fx.bytes); err == nil {
			f.Add(tarStream, false)
		} else {
			f.Add(fx.bytes, true)
		}
	}
	limits := mpk.LimitsOf(mpk.Bounds{MaxArchiveBytes: 1 << 20, MaxEntries: 64, MaxJSONDepth: 16})

	f.Fuzz(func(t *testing.T, data []byte, gz bool) {
		archiveBytes := data
		if !gz {
			archiveBytes = mpktest.Gzip(data)
		}
		a, err := mpk.Load(bytes.NewReader(archiveBytes), mpk.Options{Limits: limits})
		if err != nil {
			if errs.ClassOf(err) == 0 {
				t.Fatalf("error without a class: %v", err)
			}
			return
		}
		tarStream, err := gunzipAll(archiveBytes)
		if err != nil {
			t.Fatalf("accepted a stream that does not decompress: %v", err)
		}
		if err := formattest.CheckLayout(a.Layout("m.tar.gz"), map[string][]byte{"m.tar.gz": tarStream}); err != nil {
			t.Fatalf("accepted with an inconsistent layout: %v", err)
		}
		for _, m := range a.Members {
			if m.Offset < 0 || m.Offset+m.Size > int64(len(tarStream)) {
				t.Fatalf("member %s lies outside the tar stream", m.Name)
			}
		}
	})
}

func gunzipAll(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

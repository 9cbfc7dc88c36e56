package archiver

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/pytorch"
	"github.com/mstore/mstore/internal/testmodel"
)

// crcRuns compares each run's CRC-32 from the file's bytes in pieces of
// any length, in order; it refuses a run whose bytes changed, as the codec
// would, and a pass that ended before a run.
func TestCRCRuns(t *testing.T) {
	file := make([]byte, 1000)
	for i := range file {
		file[i] = byte(i * 13)
	}
	run := func(off, size int64, name string) formats.CRC32Check {
		return formats.CRC32Check{Offset: off, Size: size, Want: crc32.ChecksumIEEE(file[off : off+size]), Member: name}
	}
	f := fileWork{File: formats.File{Path: "m.bin", Size: int64(len(file)), CRC32Checks: []formats.CRC32Check{
		run(0, 10, "a/first"), run(10, 0, "a/empty"), run(10, 300, "a/next"), run(500, 499, "a/last")}}, format: "pytorch"}
	feed := func(data []byte, pieces ...int) error {
		r := newCRCRuns(f)
		for _, n := range pieces {
			r.write(data[:n])
			data = data[n:]
		}
		r.write(data)
		return r.result()
	}
	for _, pieces := range [][]int{nil, {1, 1, 1}, {5, 300, 7}, {499, 1}, {10, 0, 300, 190}} {
		if err := feed(file, pieces...); err != nil {
			t.Fatalf("pieces %v: %v", pieces, err)
		}
	}
	changed := bytes.Clone(file)
	changed[600] ^= 1
	err := feed(changed, 64, 64)
	if !errors.Is(err, errs.InvalidArchive) || !strings.Contains(err.Error(), `member "a/last": CRC-32 mismatch`) {
		t.Fatalf("a changed byte of a/last: %v, want invalid_archive naming it", err)
	}
	r := newCRCRuns(f)
	r.write(file[:700])
	if err := r.result(); err == nil || !strings.Contains(err.Error(), "before the CRC-32 run at 500") {
		t.Fatalf("a pass ended inside a run: %v", err)
	}
}

// writeCheckpoint writes a PyTorch checkpoint of n tensors of size bytes
// (as torch.save lays it out) into dir, and returns its bytes.
func writeCheckpoint(t testing.TB, dir string, n int, size int64) []byte {
	t.Helper()
	l, err := pytorch.Plan(testmodel.ManySmall(n, size), pytorch.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data := make([][]byte, len(l.Tensors))
	for i, tn := range l.Tensors {
		data[i] = formattest.Content(tn.Name, tn.Size)
	}
	files, err := formattest.Materialize(l, data)
	if err != nil || len(files) != 1 {
		t.Fatalf("%d files, %v", len(files), err)
	}
	if err := testmodel.Write(dir, files); err != nil {
		t.Fatal(err)
	}
	return files[l.Files[0].Path]
}

// The add's parse of a checkpoint of large storages reads its headers, not
// its storages (their CRC-32s are compared as the file is hashed, and the
// parse's reads are read again when the stored bytes are verified); and a
// storage whose bytes no longer have its CRC-32 is refused as the codec
// refuses it, with nothing recorded.
func TestAddComparesStorageCRC32s(t *testing.T) {
	root := filepath.Join(t.TempDir(), "m")
	content := writeCheckpoint(t, root, 8, 256<<10)
	src := openSource(t, root)
	l, _, log, err := parse(pytorch.Codec, src, src.SortedFiles(pytorch.Codec.Claims))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(l.Files[0].CRC32Checks); n != 8 {
		t.Fatalf("%d CRC-32 runs, want one a storage", n)
	}
	var read int64
	for _, a := range log.asks {
		if a.kind == askRead {
			read += a.got
		}
	}
	if read > int64(len(content))/20 {
		t.Fatalf("the parse read %d bytes of a file of %d", read, len(content))
	}

	st := newStore(t)
	if _, err := Add(context.Background(), st, root, Options{Name: "ok"}); err != nil {
		t.Fatal(err)
	}
	// One byte of the fourth storage changed, its CRC-32 left.
	c := l.Files[0].CRC32Checks[3]
	content[c.Offset+1000] ^= 0x10
	if err := os.WriteFile(filepath.Join(root, l.Files[0].Path), content, 0o644); err != nil {
		t.Fatal(err)
	}
	st = newStore(t)
	_, err = Add(context.Background(), st, root, Options{Name: "bad"})
	if !errors.Is(err, errs.InvalidArchive) || !strings.Contains(err.Error(), c.Member+`": CRC-32 mismatch`) {
		t.Fatalf("err = %v, want invalid_archive naming %s", err, c.Member)
	}
	if entries, _ := os.ReadDir(filepath.Join(st.Dir(), "objects")); len(entries) != 0 {
		t.Fatalf("refused add left blobs: %v", entries)
	}
}

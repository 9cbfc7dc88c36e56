package archiver

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/mpk"
	"github.com/mstore/mstore/internal/formats/mpk/mpktest"
	"github.com/mstore/mstore/internal/objects"
)

// mpkEntries is a valid MPK archive holding elf and so.
func mpkEntries(elf, so []byte) []mpktest.Entry {
	return []mpktest.Entry{
		mpktest.File("m/mpk.json", []byte(`{"version": "1.0"}`)),
		mpktest.File("m/pipeline_sequence.json", []byte(`{"pipelines": [{"sequence": [{"sequence_id": 1, "name": "a", "pluginId": "p", "configPath": "c", "processor": "MLA", "kernel": "mla", "input": "decoder"}]}]}`)),
		mpktest.File("m/model.elf", elf),
		mpktest.File("m/libshared.so", so),
	}
}

func pattern(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>11)
	}
	return b
}

// An MPK archive is stored as its tar stream: the file's size and digest
// are the tar stream's, each member is a tensor chunked from its own
// start, and two archives sharing a binary share its chunks. The decoded
// stream is spooled to an unlinked temp file that leaves nothing behind.
func TestAddCompressedArchive(t *testing.T) {
	st := newStore(t)
	dir := t.TempDir()
	so := pattern(1, objects.ChunkSize+12345) // two chunks
	tarA := mpktest.Tar(mpkEntries(pattern(2, 3000), so), mpktest.TarOptions{})
	tarB := mpktest.Tar(mpkEntries(pattern(3, 5000), so), mpktest.TarOptions{})
	a, b := filepath.Join(dir, "a.tar.gz"), filepath.Join(dir, "b.tar.gz")
	for p, tarStream := range map[string][]byte{a: tarA, b: tarB} {
		if err := os.WriteFile(p, mpktest.Gzip(tarStream), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	resA, err := Add(context.Background(), st, a, Options{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if resA.Format != "mpk" || resA.Tensors != 4 || resA.LogicalBytes != int64(len(tarA)) {
		t.Errorf("result %+v", resA)
	}
	var m *objects.Manifest
	if err := st.View(func(tx *bolt.Tx) (err error) { m, err = st.Manifest(tx, resA.Digest); return err }); err != nil {
		t.Fatal(err)
	}
	f := m.Files[0]
	if f.Path != "a.tar.gz" || f.Size != int64(len(tarA)) || f.Digest != objects.Sum(tarA) || f.Role != objects.RoleContainer ||
		f.Meta[formats.MetaCompression] != mpk.Compression {
		t.Errorf("file %+v", f)
	}
	for _, tn := range m.Tensors {
		if tn.Name == "m/libshared.so" && (tn.Digest != objects.Sum(so) || len(tn.Chunks) != 2) {
			t.Errorf("tensor %s: digest or chunks do not match the member", tn.Name)
		}
	}
	resB, err := Add(context.Background(), st, b, Options{Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if resB.NewBytes >= int64(len(so)) {
		t.Errorf("the second archive stored %d new bytes: the shared %d-byte binary was stored again", resB.NewBytes, len(so))
	}
	left, err := os.ReadDir(filepath.Join(st.Dir(), "tmp"))
	if err != nil || len(left) != 0 {
		t.Errorf("files left in the store's tmp/: %v %v", left, err)
	}
}

// A compressed file that no longer decodes to what was parsed is refused.
func TestSpoolRefusesAChangedStream(t *testing.T) {
	tarStream := mpktest.Tar(mpkEntries(pattern(2, 3000), pattern(1, 100)), mpktest.TarOptions{})
	gz := mpktest.Gzip(tarStream)
	dir := formattest.NewMemDir(map[string][]byte{"a.tar.gz": gz})
	dec := mpk.Codec.(formats.Decoder)
	tmp := t.TempDir()
	parsed := objects.Sum(gz)
	for _, size := range []int64{int64(len(tarStream)) - 1, int64(len(tarStream)) + 1} {
		if _, err := spool(dec, dir, "a.tar.gz", size, tmp, parsed); errs.ClassOf(err) != errs.IntegrityError {
			t.Errorf("size %d: spool of a stream of %d bytes: %v, want integrity_error", size, len(tarStream), err)
		}
	}
	// The same stream from other compressed bytes than the parser read.
	other := objects.Sum(append(append([]byte{}, gz...), 0))
	if _, err := spool(dec, dir, "a.tar.gz", int64(len(tarStream)), tmp, other); errs.ClassOf(err) != errs.IntegrityError {
		t.Errorf("spool of compressed bytes that were not the parsed ones: %v, want integrity_error", err)
	}
	f, err := spool(dec, dir, "a.tar.gz", int64(len(tarStream)), tmp, parsed)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, f.Size())
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, tarStream) {
		t.Errorf("spooled bytes differ (%v)", err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("spool left %v in its temp dir", left)
	}
}

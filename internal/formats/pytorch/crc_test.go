package pytorch

import (
	"hash/crc32"
	"reflect"
	"sync"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
)

// deferringDir is a Dir whose caller compares the CRC-32s a codec lists
// (formats.CRC32Deferrer), as an add's is; it notes every byte read.
type deferringDir struct {
	*formattest.MemDir
	mu   sync.Mutex
	read map[int64]bool // offsets read, of the one file
}

func (d *deferringDir) DefersCRC32() bool { return true }

func (d *deferringDir) Open(p string) (formats.ReadAtCloser, error) {
	f, err := d.MemDir.Open(p)
	return notingFile{f, d}, err
}

type notingFile struct {
	formats.ReadAtCloser
	d *deferringDir
}

func (f notingFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.ReadAtCloser.ReadAt(b, off)
	f.d.mu.Lock()
	for i := range int64(n) {
		f.d.read[off+i] = true
	}
	f.d.mu.Unlock()
	return n, err
}

// bigStorages is a checkpoint of three tensors whose storages are large
// enough (64 KiB) that the block reader leaves their data unread.
func bigStorages() ([]byte, map[string][]byte) {
	storages := map[string][]byte{"0": f32(16384), "1": f32(16384), "2": f32(16384)}
	for k, b := range storages {
		b[0] = k[0] // each its own bytes
	}
	p := newPickle().dict()
	for _, k := range []string{"0", "1", "2"} {
		p.str("w"+k).rebuild("FloatStorage", k, 16384, 0, []int64{16384}, []int64{1})
	}
	return checkpointOf(p.end(), storages), storages
}

// Given a CRC32Deferrer, the parse lists each storage's run and its CRC-32
// instead of reading it, and reads none of the storages' bytes; the layout
// is otherwise the one a plain Dir gives. A storage whose bytes were
// changed is then the caller's to refuse: the run's CRC-32 is not theirs.
func TestStorageCRC32sDeferred(t *testing.T) {
	file, storages := bigStorages()
	plain, err := parse(file)
	if err != nil {
		t.Fatal(err)
	}
	d := &deferringDir{MemDir: formattest.NewMemDir(map[string][]byte{"m.pt": file}), read: map[int64]bool{}}
	got, err := Codec.Parse(d, []string{"m.pt"})
	if err != nil {
		t.Fatal(err)
	}
	checks := got.Files[0].CRC32Checks
	if len(checks) != len(storages) {
		t.Fatalf("%d CRC-32 runs, want one a storage (%d)", len(checks), len(storages))
	}
	for _, c := range checks {
		data := file[c.Offset : c.Offset+c.Size]
		k := c.Member[len("archive/data/"):]
		if string(data) != string(storages[k]) || c.Want != crc32.ChecksumIEEE(data) {
			t.Fatalf("run %+v is not storage %s with its CRC-32", c, k)
		}
		for off := c.Offset; off < c.Offset+c.Size; off++ {
			if d.read[off] {
				t.Fatalf("the parse read byte %d of %s", off, c.Member)
			}
		}
	}
	got.Files[0].CRC32Checks = nil
	if !reflect.DeepEqual(got, plain) {
		t.Fatal("the layouts of the deferred and the plain parse differ beside the CRC-32 runs")
	}

	// One byte of a storage changed: the plain parse refuses it, the
	// deferred one leaves it to the caller, whose CRC-32 differs.
	c := checks[1]
	file[c.Offset+100] ^= 0x40
	_, err = parse(file)
	wantClass(t, err, errs.InvalidArchive, "CRC-32 mismatch", c.Member)
	d = &deferringDir{MemDir: formattest.NewMemDir(map[string][]byte{"m.pt": file}), read: map[int64]bool{}}
	if got, err = Codec.Parse(d, []string{"m.pt"}); err != nil {
		t.Fatal(err)
	}
	if c2 := got.Files[0].CRC32Checks[1]; c2.Want != c.Want || crc32.ChecksumIEEE(file[c2.Offset:c2.Offset+c2.Size]) == c2.Want {
		t.Fatalf("run %+v: its CRC-32 should be the directory's, not the changed bytes'", c2)
	}
	wantClass(t, c.Mismatch(Codec.Name(), "m.pt"), errs.InvalidArchive, "CRC-32 mismatch", c.Member)
}

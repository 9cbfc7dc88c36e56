package archiver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/modeldir"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/testmodel"
)

// stageRewritten runs add's steps up to the check of what was stored, with
// the file rewritten (same size) after the first parse ("parsed"), after
// the hashing ("stored"), or never (""). The files' state is taken again
// after the rewrite, as if no stat could see it (a filesystem with coarse
// timestamps, a write through a shared mapping): what must catch it is the
// check of the stored bytes alone. codec, when not nil, is used instead of
// the one the file's name picks. It returns how many times the check
// parsed the model again and its error.
func stageRewritten(t *testing.T, rw testmodel.Rewrite, when string, codec formats.Codec) (parses int, err error) {
	t.Helper()
	path := writeFile(t, filepath.Join(t.TempDir(), rw.File), rw.Original)
	dir, err := modeldir.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	claimed := dir.Files
	if codec == nil {
		if codec, claimed, err = chooseCodec(dir, path); err != nil {
			t.Fatal(err)
		}
	}
	before, err := statAll(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := checkedDir{Dir: dir, before: before}
	rewrite := func() {
		writeFile(t, path, rw.Rewritten)
		now, err := statAll(dir)
		if err != nil {
			t.Fatal(err)
		}
		before.m = now.m
	}
	layout, parsed, log, err := parse(codec, src, claimed)
	if err != nil {
		t.Fatal(err)
	}
	if when == "parsed" {
		rewrite()
	}
	files, err := withOtherFiles(dir, layout, claimed)
	if err != nil {
		t.Fatal(err)
	}
	st := newStore(t)
	w := st.NewBlobWriter(nil)
	defer w.Abort()
	decoded, err := decoders(codec, src, layout, st, parsed)
	if err != nil {
		t.Fatal(err)
	}
	pool := newReaderPool(src, decoded)
	defer pool.close()
	h, err := hashAndStore(context.Background(), pool, layout, files, w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if when == "stored" {
		rewrite()
	}
	counted := &countingCodec{Codec: codec}
	err = verifyStored(counted, claimed, layout, files, h, pool, log)
	return counted.parses, err
}

// countingCodec counts the parses made through it.
type countingCodec struct {
	formats.Codec
	parses int
}

func (c *countingCodec) Parse(dir formats.Dir, paths []string) (*formats.Layout, error) {
	c.parses++
	return c.Codec.Parse(dir, paths)
}

func writeFile(t *testing.T, p string, b []byte) string {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStoredBytesAreTheParsedOnes: a file rewritten at the same size after
// it was parsed (a SafeTensors header, a GGUF key/value, a checkpoint whose
// data.pkl now calls posix.system) is refused with integrity_error, even
// when its state looks unchanged, and so is one rewritten after hashing.
func TestStoredBytesAreTheParsedOnes(t *testing.T) {
	rws, err := testmodel.Rewrites("true")
	if err != nil {
		t.Fatal(err)
	}
	for _, rw := range rws {
		t.Run(rw.Format, func(t *testing.T) {
			if rw.Format == "pytorch" {
				// The rewrite is what an attacker would put there: added
				// on its own, it is refused.
				_, err := Add(context.Background(), newStore(t), writeFile(t, filepath.Join(t.TempDir(), rw.File), rw.Rewritten), Options{Name: "m"})
				if errs.ClassOf(err) != errs.SchemaError || !strings.Contains(err.Error(), "posix.system") {
					t.Fatalf("the rewritten checkpoint added on its own: %v, want schema_error naming posix.system", err)
				}
			}
			// What the parser read is what was stored: the model is not
			// parsed again.
			if parses, err := stageRewritten(t, rw, "", nil); err != nil || parses != 0 {
				t.Fatalf("an unchanged %s file: %v, parsed again %d times, want no error and no parse", rw.Format, err, parses)
			}
			for _, when := range []string{"parsed", "stored"} {
				_, err := stageRewritten(t, rw, when, nil)
				if errs.ClassOf(err) != errs.IntegrityError || !strings.Contains(err.Error(), "changed while it was being added") {
					t.Errorf("rewritten once %s: %v, want integrity_error saying it changed", when, err)
					continue
				}
				if rw.Format == "pytorch" && when == "parsed" && !strings.Contains(err.Error(), "posix.system") {
					t.Errorf("the hostile data.pkl is not named as the reason: %v", err)
				}
			}
		})
	}
}

// TestStagedReader reads a file of a frame, padding and a tensor of two
// chunks through the stagedDir at every kind of boundary, and gets the
// file's bytes; once the source changes, the read fails with
// integrity_error and so does every read after.
func TestStagedReader(t *testing.T) {
	frame := []byte("0123456789")
	tensor := make([]byte, objects.ChunkSize+7)
	for i := range tensor {
		tensor[i] = byte(i * 13)
	}
	content := append(append(append([]byte{}, frame...), make([]byte, 5)...), tensor...)
	root := t.TempDir()
	p := writeFile(t, filepath.Join(root, "f.bin"), content)
	src := openSource(t, root)
	dir, before := src.Dir, src.before
	f := fileWork{File: formats.File{Path: "f.bin", Size: int64(len(content)), Extents: []formats.Extent{
		{Kind: formats.Frame, Offset: 0, Size: 10},
		{Kind: formats.Zeros, Offset: 10, Size: 5},
		{Kind: formats.TensorData, Offset: 15, Size: int64(len(tensor)), Tensor: 0},
	}}}
	_, n := objects.ChunkBounds(int64(len(tensor)), 1)
	h := &hashes{
		frames:  map[[2]int]*span{{0, 0}: {chunks: []objects.Digest{objects.Sum(frame)}}},
		tensors: []*span{{chunks: []objects.Digest{objects.Sum(tensor[:objects.ChunkSize]), objects.Sum(tensor[objects.ChunkSize:][:n])}}},
	}
	pool := newReaderPool(checkedDir{Dir: dir, before: before}, nil)
	defer pool.close()
	sd := newStagedDir([]fileWork{f}, h, pool)
	r, err := sd.Open("f.bin")
	if err != nil {
		t.Fatal(err)
	}
	if size, _ := sd.Stat("f.bin"); size != int64(len(content)) || r.Size() != size {
		t.Fatalf("size %d, %d; want %d", size, r.Size(), len(content))
	}
	for _, c := range []struct{ off, n int64 }{
		{0, 10}, {5, 10}, {9, 7}, {0, int64(len(content))}, {15 + objects.ChunkSize - 3, 6}, {int64(len(content)) - 4, 4}, {12, 1},
	} {
		got := make([]byte, c.n)
		if _, err := r.ReadAt(got, c.off); err != nil || !bytes.Equal(got, content[c.off:c.off+c.n]) {
			t.Errorf("ReadAt(%d bytes at %d): %v, bytes differ: %v", c.n, c.off, err, !bytes.Equal(got, content[c.off:c.off+c.n]))
		}
	}
	if n, err := r.ReadAt(make([]byte, 10), int64(len(content))-4); n != 4 || err != io.EOF {
		t.Errorf("read past the end: %d, %v; want 4, EOF", n, err)
	}
	if _, err := sd.Open("other.bin"); errs.ClassOf(err) != errs.NotFound {
		t.Errorf("a file not added: %v, want not_found", err)
	}

	// The same size, other bytes in the tensor's second chunk; the state
	// is taken again so that only the digests can tell.
	changed := bytes.Clone(content)
	changed[len(changed)-1] ^= 1
	writeFile(t, p, changed)
	now, _ := statAll(dir)
	before.m = now.m
	sd = newStagedDir([]fileWork{f}, h, pool)
	r, _ = sd.Open("f.bin")
	if _, err := r.ReadAt(make([]byte, 4), 0); err != nil {
		t.Fatalf("the unchanged frame: %v", err)
	}
	if _, err := r.ReadAt(make([]byte, 1), int64(len(content))-1); errs.ClassOf(err) != errs.IntegrityError {
		t.Fatalf("the changed chunk: %v, want integrity_error", err)
	}
	if _, err := r.ReadAt(make([]byte, 4), 0); errs.ClassOf(err) != errs.IntegrityError || errs.ClassOf(sd.failure()) != errs.IntegrityError {
		t.Fatalf("a read after a failure: %v (failure %v), want integrity_error", err, sd.failure())
	}
}

// TestStagedReaderRuns reads a file of 200 small frames and tensors (a
// zip of many members) whole, as runs of whole chunks read at once: the
// bytes are the file's; once one tensor in the middle changes, a read
// of the run that holds it fails with integrity_error, and a read that
// ends before it does not.
func TestStagedReaderRuns(t *testing.T) {
	var content []byte
	var extents []formats.Extent
	h := &hashes{frames: map[[2]int]*span{}}
	for i := range 200 {
		frame := []byte(fmt.Sprintf("header of member %03d, padded.", i))
		tensor := bytes.Repeat([]byte{byte(i)}, 61)
		h.frames[[2]int{0, len(extents)}] = &span{chunks: []objects.Digest{objects.Sum(frame)}}
		extents = append(extents, formats.Extent{Kind: formats.Frame, Offset: int64(len(content)), Size: int64(len(frame))})
		content = append(content, frame...)
		extents = append(extents, formats.Extent{Kind: formats.TensorData, Offset: int64(len(content)), Size: int64(len(tensor)), Tensor: i})
		h.tensors = append(h.tensors, &span{chunks: []objects.Digest{objects.Sum(tensor)}})
		content = append(content, tensor...)
	}
	root := t.TempDir()
	p := writeFile(t, filepath.Join(root, "f.zip"), content)
	src := openSource(t, root)
	dir, before := src.Dir, src.before
	f := fileWork{File: formats.File{Path: "f.zip", Size: int64(len(content)), Extents: extents}}
	pool := newReaderPool(checkedDir{Dir: dir, before: before}, nil)
	defer pool.close()
	r, err := newStagedDir([]fileWork{f}, h, pool).Open("f.zip")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(content))
	if n, err := r.ReadAt(got, 0); err != nil || n != len(content) || !bytes.Equal(got, content) {
		t.Fatalf("the whole file: %d bytes, %v; bytes differ: %v", n, err, !bytes.Equal(got, content))
	}

	changed := bytes.Clone(content)
	at := extents[201].Offset + 30 // in tensor 100
	changed[at] ^= 1
	writeFile(t, p, changed)
	now, _ := statAll(dir)
	before.m = now.m
	sd := newStagedDir([]fileWork{f}, h, pool)
	r, _ = sd.Open("f.zip")
	if _, err := r.ReadAt(make([]byte, extents[201].Offset), 0); err != nil {
		t.Fatalf("the 100 members before the change: %v", err)
	}
	if _, err := r.ReadAt(got, 0); errs.ClassOf(err) != errs.IntegrityError {
		t.Fatalf("a run over the changed tensor: %v, want integrity_error", err)
	}
}

package archiver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/modeldir"
	"github.com/mstore/mstore/internal/testmodel"
)

// openSource opens the model directory root for an add, its files' states
// taken.
func openSource(t *testing.T, root string) checkedDir {
	t.Helper()
	dir, err := modeldir.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	before, err := statAll(dir)
	if err != nil {
		t.Fatal(err)
	}
	return checkedDir{Dir: dir, before: before}
}

// TestReaderPoolClosesFiles: hashing a model of many files leaves at most
// maxIdleFiles of them open, however many there are.
func TestReaderPoolClosesFiles(t *testing.T) {
	root := filepath.Join(t.TempDir(), "m")
	writeModel(t, root, testmodel.Tiny)
	for i := range 200 {
		writeFile(t, filepath.Join(root, fmt.Sprintf("extra%03d.txt", i)), []byte(strings.Repeat("x", i)))
	}
	dir, err := modeldir.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	codec, claimed, err := chooseCodec(dir, root)
	if err != nil {
		t.Fatal(err)
	}
	before, err := statAll(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := checkedDir{Dir: dir, before: before}
	layout, _, _, err := parse(codec, src, claimed)
	if err != nil {
		t.Fatal(err)
	}
	files, err := withOtherFiles(dir, layout, claimed)
	if err != nil {
		t.Fatal(err)
	}
	st := newStore(t)
	w := st.NewBlobWriter(nil)
	defer w.Abort()
	pool := newReaderPool(src, nil)
	defer pool.close()
	if _, err := hashAndStore(context.Background(), pool, layout, files, w, Options{Workers: 4}); err != nil {
		t.Fatal(err)
	}
	if n := pool.openFiles(); n > maxIdleFiles {
		t.Fatalf("%d files open after hashing %d files, want at most %d", n, len(files), maxIdleFiles)
	}
}

// TestFileStateChecks: a file rewritten at the same size with its mtime
// set back (ctime), truncated (size), or replaced by another (inode) is
// refused with integrity_error; an untouched one passes.
func TestFileStateChecks(t *testing.T) {
	for name, change := range map[string]func(t *testing.T, p string){
		"untouched": func(*testing.T, string) {},
		"rewritten, mtime set back": func(t *testing.T, p string) {
			// Past a tick of a kernel with coarse timestamps: a rewrite
			// within one is seen only by verifyStored.
			time.Sleep(20 * time.Millisecond)
			info, _ := os.Stat(p)
			writeFile(t, p, []byte("HELLO"))
			if err := os.Chtimes(p, info.ModTime(), info.ModTime()); err != nil {
				t.Fatal(err)
			}
		},
		"truncated": func(t *testing.T, p string) {
			if err := os.Truncate(p, 2); err != nil {
				t.Fatal(err)
			}
		},
		"replaced": func(t *testing.T, p string) {
			info, _ := os.Stat(p)
			other := writeFile(t, p+".new", []byte("hello"))
			os.Chtimes(other, info.ModTime(), info.ModTime())
			if err := os.Rename(other, p); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			p := writeFile(t, filepath.Join(root, "a.bin"), []byte("hello"))
			src := openSource(t, root)
			change(t, p)
			f, openErr := src.Open("a.bin")
			if openErr == nil {
				f.Close()
			}
			endErr := checkUnchanged(src.Dir, []fileWork{{File: formats.File{Path: "a.bin"}}}, src.before)
			for what, err := range map[string]error{"open": openErr, "end": endErr} {
				if want := name != "untouched"; want != (errs.ClassOf(err) == errs.IntegrityError) {
					t.Errorf("%s: %v", what, err)
				}
			}
		})
	}
}

// TestFileDigestIsOfTheStoredBytes: a file's digest is of the bytes its
// extents store; a layout that places one tensor twice over different
// bytes (checkout would write the first bytes twice) fails with
// integrity_error; over equal bytes it passes.
func TestFileDigestIsOfTheStoredBytes(t *testing.T) {
	for _, c := range []struct {
		name  string
		b     []byte
		class errs.Class
	}{
		{"same bytes twice", []byte("hdrAAAABBBBAAAABBBB"), 0},
		{"other bytes the second time", []byte("hdrAAAABBBBAAAABBBX"), errs.IntegrityError},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			writeFile(t, filepath.Join(root, "f.bin"), c.b)
			src := openSource(t, root)
			l := &formats.Layout{Format: "test", Tensors: []formats.Tensor{{Name: "w", DType: "U8", Shape: []int64{8}, Size: 8}},
				Files: []formats.File{{Path: "f.bin", Size: 19, Extents: []formats.Extent{
					{Kind: formats.Frame, Offset: 0, Size: 3},
					{Kind: formats.TensorData, Offset: 3, Size: 8, Tensor: 0},
					{Kind: formats.TensorData, Offset: 11, Size: 8, Tensor: 0},
				}}}}
			files := []fileWork{{File: l.Files[0]}}
			st := newStore(t)
			w := st.NewBlobWriter(nil)
			defer w.Abort()
			pool := newReaderPool(src, nil)
			defer pool.close()
			_, err := hashAndStore(context.Background(), pool, l, files, w, Options{})
			if errs.ClassOf(err) != c.class {
				t.Fatalf("hashAndStore: %v, want class %v", err, c.class)
			}
		})
	}
}

package restorer

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/testmodel"
)

// TestStoredFrames reads the frames of a stored file back: each frame
// extent's bytes as in the original file, nil for tensor extents.
func TestStoredFrames(t *testing.T) {
	st, dir, d := added(t, testmodel.Spec{Layers: 1, Hidden: 8, Vocab: 16, DType: "F32", Seed: 3})
	var m *objects.Manifest
	if err := st.View(func(tx *bolt.Tx) (err error) { m, err = st.Manifest(tx, d); return }); err != nil {
		t.Fatal(err)
	}
	frames := storedFrames(st, m)
	checked := 0
	for _, f := range m.Files {
		orig, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := frames(f.Path, 1<<30)
		if err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		if len(got) != len(f.Extents) {
			t.Fatalf("%s: %d entries for %d extents", f.Path, len(got), len(f.Extents))
		}
		var off int64
		for i, e := range f.Extents {
			switch e.Kind {
			case objects.ExtentFrame:
				if !bytes.Equal(got[i], orig[off:off+e.Size]) {
					t.Errorf("%s: frame %d differs", f.Path, i)
				}
				checked++
			case objects.ExtentTensor:
				if got[i] != nil {
					t.Errorf("%s: tensor extent %d has bytes", f.Path, i)
				}
			}
			off += e.Size
		}
	}
	if checked == 0 {
		t.Fatal("no frame checked")
	}
	if _, err := frames(m.Files[0].Path, 1); errs.ClassOf(err) != errs.SizeLimitExceeded {
		t.Errorf("over the limit: %v, want size_limit_exceeded", err)
	}
	if _, err := frames("nope", 1<<30); errs.ClassOf(err) != errs.NotFound {
		t.Errorf("unknown file: %v, want not_found", err)
	}
}

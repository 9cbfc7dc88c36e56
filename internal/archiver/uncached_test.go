package archiver

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testenv"
	"github.com/mstore/mstore/internal/testmodel"
)

// An add writes its large blobs past the page cache: nothing reads them
// back soon, and in a VM copying each byte into fresh page-cache pages
// cost more than hashing it.
func TestAddWritesLargeBlobsUncached(t *testing.T) {
	st := newStore(t)
	testenv.RequireDirectIO(t, st.Dir())
	dir := filepath.Join(t.TempDir(), "model")
	writeModel(t, dir, testmodel.Spec{Layers: 1, Hidden: 1024, Vocab: 1024, DType: "F32", Seed: 3})
	if _, err := Add(context.Background(), st, dir, Options{Name: "m"}); err != nil {
		t.Fatal(err)
	}
	large := 0
	err := filepath.WalkDir(filepath.Join(st.Dir(), "objects"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) == ".pack" {
			return err
		}
		fi, err := d.Info()
		if err != nil || fi.Size() < store.PackThreshold {
			return err
		}
		large++
		head := int(fi.Size()) &^ 4095
		if n := testenv.ResidentPages(t, p, head); n > 0 {
			t.Errorf("blob %s of %d bytes: %d of its %d whole pages are in the page cache", filepath.Base(p), fi.Size(), n, head/4096)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if large == 0 {
		t.Fatal("the model stored no blob of PackThreshold bytes or more: the test checks nothing")
	}
}

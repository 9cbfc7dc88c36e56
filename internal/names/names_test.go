package names_test

import (
	"context"
	"go/build"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/store/storetest"
)

// store and refs do not import each other: what needs both is here.
func TestStoreAndRefsAreUntied(t *testing.T) {
	for pkg, not := range map[string]string{"store": "refs", "refs": "store"} {
		p, err := build.Import("github.com/mstore/mstore/internal/"+pkg, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(p.Imports, "github.com/mstore/mstore/internal/"+not) {
			t.Errorf("%s imports %s", pkg, not)
		}
	}
}

// Without the names layer, the index is not rebuilt (the refs would be
// lost) and fsck says it did not check names and calls nothing
// unreferenced; through this package, both see the refs.
func TestNamesLayerIsNeeded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	st, err := store.Open(dir, true, store.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d := storetest.Add(t, st, storetest.Variant(t, t.TempDir(), "m", 1), "m")
	if _, err := store.RebuildIndex(context.Background(), dir, store.Options{}, 1); err == nil {
		t.Fatal("RebuildIndex without names rebuilt the index")
	}
	r, err := st.Fsck(context.Background(), store.FsckOptions{})
	if err != nil || !slices.ContainsFunc(r.Warnings, func(w string) bool { return strings.Contains(w, "names") }) || len(r.Unreferenced) != 0 {
		t.Fatalf("fsck without names: %+v %v", r, err)
	}
	r, err = names.Fsck(context.Background(), st, store.FsckOptions{})
	if err != nil || !r.OK || r.Refs != 1 {
		t.Fatalf("fsck: %+v %v", r, err)
	}
	rep, err := names.RebuildIndex(context.Background(), dir, store.Options{}, 1)
	if err != nil || !rep.OK || rep.Refs != 1 {
		t.Fatalf("rebuild: %+v %v", rep, err)
	}
	if got, err := names.Resolve(st, "m"); err != nil || got != d {
		t.Fatalf("resolve m = %v %v, want %v", got, err, d)
	}
}

package gc_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/gc"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/store/storetest"
)

// TestGCSurvivesEveryIOError fails each file-system call of a gc that
// repacks and deletes (writes, syncs, renames, removes) in turn, with EIO,
// and each write with ENOSPC. Each time gc must fail with that error (a failed delete named
// in the result), leave a store fsck calls clean with every named version
// whole, and succeed when run again.
func TestGCSurvivesEveryIOError(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.trimM(t)
	template := f.st.Dir()

	counter := &storetest.FaultFS{CountRemoves: true}
	plan, _, err := gc.Run(context.Background(), openCopy(t, template, counter), noGrace)
	if err != nil {
		t.Fatal(err)
	}
	calls := counter.Calls()
	if len(plan.Repacks) == 0 || len(calls) < 8 {
		t.Fatalf("the clean gc repacked %d packs in %d calls: %v", len(plan.Repacks), len(calls), calls)
	}
	for _, errno := range []syscall.Errno{syscall.EIO, syscall.ENOSPC} {
		name := map[syscall.Errno]string{syscall.EIO: "EIO", syscall.ENOSPC: "ENOSPC"}[errno]
		for n := 1; n <= len(calls); n++ {
			if errno == syscall.ENOSPC && calls[n-1] != storetest.OpWrite {
				continue // a full disk fails writes; other calls fail alike with EIO
			}
			t.Run(fmt.Sprintf("%s/%d-%s", name, n, calls[n-1]), func(t *testing.T) {
				t.Parallel()
				fault := &storetest.FaultFS{FailAt: n, Errno: errno, CountRemoves: true}
				st := openCopy(t, template, fault)
				_, res, err := gc.Run(context.Background(), st, noGrace)
				if !errors.Is(err, errno) {
					t.Fatalf("gc with call %d (%s) failing: err = %v, want %v", n, fault.Fired(), err, errno)
				}
				if fault.Fired() == storetest.OpRemove && (res == nil || len(res.FailedDeletes) != 1) {
					t.Errorf("a failed delete is not reported: %+v", res)
				}
				st = reopen(t, st.Dir())
				storetest.Fsck(t, st, store.FsckOptions{})
				g := &fixture{st: st, a: f.a, b: f.b, c: f.c, d: f.d, e: f.e, digests: f.digests}
				if _, _, err := gc.Run(context.Background(), st, noGrace); err != nil {
					t.Fatalf("gc again: %v", err)
				}
				g.requireNamed(t, false)
				requireTidy(t, st)
			})
		}
	}
}

// openCopy copies the store at dir and opens the copy with fsys.
func openCopy(t *testing.T, dir string, fsys store.FS) *store.Store {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "store")
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dst, false, store.Options{LockTimeout: 5 * time.Second, FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func reopen(t *testing.T, dir string) *store.Store {
	t.Helper()
	st, err := store.Open(dir, false, store.Options{LockTimeout: 5 * time.Second, FS: storetest.NoSyncFS{}})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

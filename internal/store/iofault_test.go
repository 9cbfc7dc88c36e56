package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/store/storetest"
)

// TestAddSurvivesEveryIOError fails each file-system call of an add in turn
// (every write, close, sync, mkdir and rename), with EIO and with ENOSPC (a
// failing write first writes half its bytes, as a full disk does). Each
// time the add must fail with that error, leave no temp file, leave a store
// that fsck calls clean with the earlier version intact, and succeed when
// tried again.
func TestAddSurvivesEveryIOError(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	first := storetest.Variant(t, root, "first", 1)
	second := storetest.Variant(t, root, "second", 1, 2, 3) // shares a third of first's tensors

	// Count the calls of a clean add of second onto a store holding first.
	counter := &storetest.FaultFS{}
	st := openWith(t, filepath.Join(root, "count"), nil)
	storetest.Add(t, st, first, "first")
	st = openWith(t, st.Dir(), counter)
	if _, err := archiver.Add(context.Background(), st, second.Dir, archiver.Options{Name: "second", Workers: 1}); err != nil {
		t.Fatal(err)
	}
	calls := counter.Calls()
	if len(calls) < 10 {
		t.Fatalf("a clean add made only %d counted calls: %v", len(calls), calls)
	}

	for _, errno := range []syscall.Errno{syscall.EIO, syscall.ENOSPC} {
		for n := 1; n <= len(calls); n++ {
			t.Run(fmt.Sprintf("%s/%d-%s", errnoName(errno), n, calls[n-1]), func(t *testing.T) {
				t.Parallel()
				dir := filepath.Join(t.TempDir(), "store")
				st := openWith(t, dir, nil)
				storetest.Add(t, st, first, "first")

				fault := &storetest.FaultFS{FailAt: n, Errno: errno}
				faulty := openWith(t, dir, fault)
				_, err := archiver.Add(context.Background(), faulty, second.Dir, archiver.Options{Name: "second", Workers: 1})
				if !errors.Is(err, errno) {
					t.Fatalf("add with call %d (%s) failing: err = %v, want %v", n, fault.Fired(), err, errno)
				}
				if left, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(left) != 0 {
					t.Fatalf("temp files left after a failed add: %v", left)
				}
				r := storetest.Fsck(t, st, store.FsckOptions{})
				for _, l := range r.Leftovers {
					if l.Kind == "temp" || l.Kind == "unknown" {
						t.Errorf("leftover %+v", l)
					}
				}
				if _, err := names.Resolve(st, "second"); err == nil {
					t.Fatal("the failed add moved its ref")
				}
				storetest.RequireCheckout(t, st, "first", first)

				storetest.Add(t, st, second, "second")
				storetest.RequireCheckout(t, st, "second", second)
				storetest.RequireCheckout(t, st, "first", first)
				storetest.Fsck(t, st, store.FsckOptions{Repair: true})
				if r := storetest.Fsck(t, st, store.FsckOptions{}); len(r.Leftovers) != 0 {
					t.Fatalf("leftovers after fsck --repair: %+v", r.Leftovers)
				}
			})
		}
	}
}

// openWith opens (or creates) the store at dir with fs, or without syncs
// when fs is nil.
func openWith(t *testing.T, dir string, fs store.FS) *store.Store {
	t.Helper()
	if fs == nil {
		fs = storetest.NoSyncFS{}
	}
	st, err := store.Open(dir, true, store.Options{LockTimeout: 5 * time.Second, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func errnoName(e syscall.Errno) string {
	switch e {
	case syscall.EIO:
		return "EIO"
	case syscall.ENOSPC:
		return "ENOSPC"
	}
	return fmt.Sprint(int(e))
}

// A failure of SyncAhead's sync fails Commit, though Commit's own sync
// succeeds: a sync reports a write's failure once, and the blobs it was
// to make durable must not be recorded. Nothing is left in tmp/.
func TestSyncAheadFailureFailsCommit(t *testing.T) {
	t.Parallel()
	blobs := [][]byte{[]byte("a small blob, packed"), bytes.Repeat([]byte("loose"), store.PackThreshold/4)}
	put := func(st *store.Store) *store.BlobWriter {
		w := st.NewBlobWriter(nil)
		for _, b := range blobs {
			if _, err := w.Put(objects.Sum(b), b); err != nil {
				t.Fatal(err)
			}
		}
		return w
	}
	counter := &storetest.FaultFS{}
	w := put(openWith(t, filepath.Join(t.TempDir(), "store"), counter))
	n := len(counter.Calls())
	w.Abort()

	fault := &storetest.FaultFS{FailAt: n + 1, Errno: syscall.EIO}
	dir := filepath.Join(t.TempDir(), "store")
	w = put(openWith(t, dir, fault))
	w.SyncAhead()
	_, err := w.Commit()
	w.Abort()
	if !errors.Is(err, syscall.EIO) || fault.Fired() != storetest.OpSyncFS {
		t.Fatalf("commit after a failed SyncAhead: %v (failed call %q), want EIO from syncfs", err, fault.Fired())
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(left) != 0 {
		t.Fatalf("temp files left: %v", left)
	}
}

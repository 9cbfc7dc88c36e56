package store_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/store/storetest"
)

// A checkout record is written durably: on the real file system by an
// fsync of its own file, elsewhere by a syncfs; each file-system call
// failing in turn fails the write with that error, leaves no temp file and
// no record, and the old record (if any) stays.
func TestCheckoutRecordWrites(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	real, err := store.Open(dir, true, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := real.PutCheckoutRecord("00ab.1-2", []byte("old")); err != nil {
		t.Fatal(err)
	}
	counter := &storetest.FaultFS{}
	if err := openWith(t, dir, counter).PutCheckoutRecord("00ab.1-2", []byte("counted")); err != nil {
		t.Fatal(err)
	}
	calls := counter.Calls()
	if len(calls) < 4 {
		t.Fatalf("a record write made %d counted calls (%v): want create, write, close, sync, rename, sync dir", len(calls), calls)
	}
	for n := 1; n <= len(calls); n++ {
		t.Run(fmt.Sprintf("%d-%s", n, calls[n-1]), func(t *testing.T) {
			if err := real.PutCheckoutRecord("00ab.1-2", []byte("old")); err != nil {
				t.Fatal(err)
			}
			fault := &storetest.FaultFS{FailAt: n, Errno: syscall.EIO}
			err := openWith(t, dir, fault).PutCheckoutRecord("00ab.1-2", []byte("new"))
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("err = %v, want EIO", err)
			}
			if left, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(left) != 0 {
				t.Fatalf("temp files left: %v", left)
			}
			got, err := real.CheckoutRecord("00ab.1-2")
			if err != nil || string(got) != "old" && calls[n-1] != storetest.OpSync {
				t.Fatalf("record after a failed write: %q, %v", got, err)
			}
		})
	}
	if err := real.PutCheckoutRecord("00ab.1-2", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if got, err := real.CheckoutRecord("00ab.1-2"); err != nil || string(got) != "new" {
		t.Fatalf("record %q, %v", got, err)
	}
	if _, err := real.CheckoutRecord("00ab.9-9"); errs.ClassOf(err) != errs.NotFound {
		t.Fatalf("a missing record: err = %v, want not_found", err)
	}
}

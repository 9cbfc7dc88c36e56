package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/errs"
)

func TestLockModes(t *testing.T) {
	st := newStore(t)
	const wait = 30 * time.Millisecond
	a, err := st.Lock(LockShared, wait)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.Lock(LockShared, wait)
	if err != nil {
		t.Fatalf("a second shared lock: %v", err)
	}
	if _, err := st.Lock(LockExclusive, wait); !errors.Is(err, errs.Conflict) {
		t.Fatalf("exclusive while shared is held: err = %v, want conflict", err)
	}
	a.Unlock()
	b.Unlock()
	b.Unlock() // twice is fine
	x, err := st.Lock(LockExclusive, wait)
	if err != nil {
		t.Fatalf("exclusive once the shared locks are gone: %v", err)
	}
	if _, err := st.Lock(LockShared, wait); !errors.Is(err, errs.Conflict) {
		t.Fatalf("shared while exclusive is held: err = %v, want conflict", err)
	}
	if _, err := st.Lock(0, wait); err == nil || errs.ClassOf(err) != 0 {
		t.Fatalf("invalid mode: err = %v, want an unclassified error", err)
	}

	// A waiting lock gets it as soon as the holder lets go.
	go func() {
		time.Sleep(20 * time.Millisecond)
		x.Unlock()
	}()
	start := time.Now()
	y, err := st.Lock(LockShared, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	y.Unlock()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("waited %s for a lock released after 20 ms", d)
	}
}

// A store whose directory may not be written (a read-only mount) can still
// be read: the shared lock is taken on the existing lock file, or skipped
// when there is none.
func TestSharedLockOnReadOnlyStore(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root: permissions do not stop root from creating the lock file") // choice: root is not stopped by permissions, nothing to check
	}
	st := newStore(t)
	if err := os.Chmod(st.Dir(), 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(st.Dir(), 0o755) })
	l, err := st.Lock(LockShared, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l.Unlock()
	if _, err := os.Stat(filepath.Join(st.Dir(), lockFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("lock file in a read-only store: %v", err)
	}
}

package s3remote

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/remote/s3remote/s3test"
)

// TestLocks: against versitygw, a second gc and a push beside a gc are
// conflicts, as is a gc beside a push or beside a lock it cannot read; a
// lock not refreshed for staleAfter is stale: a push ignores a stale gc
// lock, gc reports stale push locks and removes them only when asked, and
// never one refreshed since it was read; a held lock is refreshed, and a
// released one is gone.
func TestLocks(t *testing.T) {
	srv := s3test.Start(t)
	r, err := Open("s3://"+srv.Bucket(t, "locks-test")+"/p", Options{Endpoint: srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conflict := func(what, want string, err error) {
		t.Helper()
		if errs.ClassOf(err) != errs.Conflict || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: %v; want a conflict saying %q", what, err, want)
		}
	}
	locks := func() []LockInfo {
		t.Helper()
		ls, err := r.Locks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ls
	}

	gc, stale, err := r.LockGC(ctx, false)
	if err != nil || len(stale) != 0 {
		t.Fatalf("first gc lock: %v %v", stale, err)
	}
	_, _, err = r.LockGC(ctx, true)
	conflict("second gc", "another gc", err)
	_, err = r.LockPush(ctx)
	conflict("push beside gc", "gc --remote is collecting", err)
	if ls := locks(); len(ls) != 1 || ls[0].Kind != "gc" || ls[0].Stale {
		t.Fatalf("locks while gc runs: %+v; want only gc's, held (the refused push removed its own)", ls)
	}
	gc.Release()

	release, err := r.LockPush(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = r.LockGC(ctx, true)
	conflict("gc beside push", "a push into", err)
	if ls := locks(); len(ls) != 1 || ls[0].Kind != "push" {
		t.Fatalf("locks after the refused gc: %+v; want only the push's", ls)
	}

	// A lock nobody refreshes goes stale (here at once).
	defer func(d time.Duration) { staleAfter = d }(staleAfter)
	staleAfter = 0
	gc, stale, err = r.LockGC(ctx, false)
	if err != nil || len(stale) != 1 || stale[0].Kind != "push" || stale[0].Removed {
		t.Fatalf("gc beside a stale push lock: %+v %v; want it run, the lock reported and kept", stale, err)
	}
	gc.Release()
	gc, stale, err = r.LockGC(ctx, true)
	if err != nil || len(stale) != 1 || !stale[0].Removed {
		t.Fatalf("gc --remove-stale-locks: %+v %v; want the push lock removed", stale, err)
	}
	release() // its lock is gone already: releasing is harmless
	// A gc lock left stale: a push ignores it; a gc refuses unless told to remove it.
	if rel, err := r.LockPush(ctx); err != nil {
		t.Fatalf("push beside a stale gc lock: %v", err)
	} else {
		rel()
	}
	_, _, err = r.LockGC(ctx, false)
	conflict("gc beside a stale gc lock", "--remove-stale-locks", err)
	gc2, stale, err := r.LockGC(ctx, true)
	if err != nil || len(stale) != 1 || stale[0].Kind != "gc" || !stale[0].Removed {
		t.Fatalf("gc removing a stale gc lock: %+v %v", stale, err)
	}
	gc2.Release()
	gc.Release() // the lock it held is another's now, and gone

	// A held lock is refreshed; one refreshed after it was read as stale
	// is its live owner's: kept.
	defer func(d time.Duration) { lockRefresh = d }(lockRefresh)
	lockRefresh = time.Second
	release, err = r.LockPush(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	before := locks()
	time.Sleep(2500 * time.Millisecond) // Last-Modified has whole seconds
	if after := locks(); len(after) != 1 || !after[0].Refreshed.After(before[0].Refreshed) {
		t.Fatalf("lock not refreshed: %+v then %+v", before, after)
	}
	conflict("removing a refreshed lock", "refreshed meanwhile", r.removeLock(ctx, &before[0]))
	release()
	if ls := locks(); len(ls) != 0 {
		t.Fatalf("locks after release: %+v", ls)
	}

	// A lock that does not parse is held until stale by age.
	staleAfter = time.Hour
	if err := r.put(ctx, r.lockKey("push-garbage"), []byte("{"), true, ""); err != nil {
		t.Fatal(err)
	}
	if ls := locks(); len(ls) != 1 || ls[0].Kind != "unknown" || ls[0].Stale {
		t.Fatalf("an unreadable lock: %+v; want kind unknown, held", ls)
	}
	_, _, err = r.LockGC(ctx, true)
	conflict("gc beside an unreadable lock", "a push into", err)
	r.c.RemoveObject(ctx, r.bucket, r.lockKey("push-garbage"), minio.RemoveObjectOptions{})
}

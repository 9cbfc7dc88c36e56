package httpremote

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/remote/pathremote"
	"github.com/mstore/mstore/internal/remote/s3remote"
	"github.com/mstore/mstore/internal/remote/s3remote/s3test"
)

// TestPushLockThroughServer: over a bucket the server takes the push lock
// for its client and releases it when told, or when the client has sent
// nothing for lockIdle; over a store, which needs none, it takes none.
func TestPushLockThroughServer(t *testing.T) {
	gw := s3test.Start(t)
	bucket, err := s3remote.Open("s3://"+gw.Bucket(t, "serve-locks")+"/p", s3remote.Options{Endpoint: gw.Endpoint, AccessKey: gw.AccessKey, SecretKey: gw.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	client := func(o ServerOptions) *Client {
		t.Helper()
		o.AllowPush, o.PushToken = true, "tok"
		srv := httptest.NewServer(NewHandler(o))
		t.Cleanup(srv.Close)
		c, err := New(ctx, srv.URL, ClientOptions{Token: "tok"})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	held := func() int {
		t.Helper()
		ls, err := bucket.Locks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(ls)
	}
	defer func(d time.Duration) { lockIdle = d }(lockIdle)
	lockIdle = 300 * time.Millisecond

	c := client(ServerOptions{Backend: bucket})
	release, err := c.LockPush(ctx)
	if err != nil || held() != 1 {
		t.Fatalf("lock through the server: %v, %d locks in the bucket", err, held())
	}
	for range 4 { // requests that name the lock keep it past lockIdle
		time.Sleep(lockIdle / 2)
		if _, err := c.HasBlobs(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	if held() != 1 {
		t.Fatal("a lock in use was released as idle")
	}
	release()
	if held() != 0 {
		t.Fatal("released lock still in the bucket")
	}

	if _, err := c.LockPush(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * lockIdle) // the client goes silent
	if held() != 0 {
		t.Fatal("an idle client's lock was kept")
	}

	store, err := pathremote.Open(filepath.Join(t.TempDir(), "s"), true)
	if err != nil {
		t.Fatal(err)
	}
	if release, err := client(ServerOptions{Backend: store}).LockPush(ctx); err != nil {
		t.Fatalf("lock through a server over a store: %v; want none taken, no error", err)
	} else {
		release()
	}
}

package transfer

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote/httpremote"
	"github.com/mstore/mstore/internal/remote/pathremote"
	"github.com/mstore/mstore/internal/remote/remotetest"
	"github.com/mstore/mstore/internal/store"
)

// TestSmallBlobsTravelInBatches: a push and a pull of a version of 20,000
// small blobs over HTTP take a few dozen requests, not 20,000.
func TestSmallBlobsTravelInBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("20,000 blobs")
	}
	ctx := context.Background()
	const n = 20_000
	v := remotetest.MakeManySmall(t, 1, n)
	srcDir := filepath.Join(t.TempDir(), "src")
	src, err := pathremote.Open(srcDir, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 4000 {
		if err := src.PutBlobs(ctx, v.Blobs[i:min(i+4000, n)]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := src.PutManifest(ctx, v.Digest, v.Encoded); err != nil {
		t.Fatal(err)
	}
	if err := src.MoveRef(ctx, "many", objects.Digest{}, v.Digest, ""); err != nil {
		t.Fatal(err)
	}
	backend, err := pathremote.Open(filepath.Join(t.TempDir(), "served"), true)
	if err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int64
	h := httpremote.NewHandler(httpremote.ServerOptions{Backend: backend, AllowPush: true, PushToken: "t"})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c, err := httpremote.New(ctx, srv.URL, httpremote.ClientOptions{Token: "t"})
	if err != nil {
		t.Fatal(err)
	}

	local, err := store.Open(srcDir, false, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	requests.Store(0)
	res, err := Push(ctx, local, c, PushOptions{Version: "many"})
	if err != nil || res.BlobsMoved != n+1 { // and the manifest
		t.Fatalf("push: %+v, %v", res, err)
	}
	t.Logf("push: %d requests", requests.Load())
	if got := requests.Load(); got > 30 {
		t.Fatalf("push of %d small blobs took %d requests", n, got)
	}
	into, err := store.Open(filepath.Join(t.TempDir(), "into"), true, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	requests.Store(0)
	res, err = Pull(ctx, into, c, PullOptions{Version: "many"})
	if err != nil || res.BlobsMoved != n+1 { // and the manifest
		t.Fatalf("pull: %+v, %v", res, err)
	}
	t.Logf("pull: %d requests", requests.Load())
	if got := requests.Load(); got > 30 {
		t.Fatalf("pull of %d small blobs took %d requests", n, got)
	}
}

package s3remote_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/remote/remotetest"
	"github.com/mstore/mstore/internal/remote/s3remote"
	"github.com/mstore/mstore/internal/remote/s3remote/s3test"
)

// counting is a proxy in front of versitygw that counts the requests by
// method.
type counting struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counting) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

func countingProxy(t *testing.T, srv *s3test.Server) (*counting, string) {
	u, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c := &counting{n: map[string]int{}}
	p := httputil.NewSingleHostReverseProxy(u)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.n[r.Method]++
		c.mu.Unlock()
		p.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return c, front.URL
}

func openAt(t *testing.T, srv *s3test.Server, endpoint, u string) *s3remote.Remote {
	t.Helper()
	r, err := s3remote.Open(u, s3remote.Options{Endpoint: endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// objectsUnder counts the objects versitygw keeps under bucket/sub.
func objectsUnder(t *testing.T, srv *s3test.Server, sub string) int {
	n := 0
	filepath.WalkDir(filepath.Join(srv.Dir, sub), func(_ string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// TestSmallBlobsInPacks: 3,000 small blobs pushed in three batches are
// three packs (six PUTs, no blob object), and another client reads all of
// them back in a handful of GETs, not 3,000.
func TestSmallBlobsInPacks(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.Bucket(t, "packs")
	count, front := countingProxy(t, srv)
	ctx := context.Background()
	v := remotetest.MakeManySmall(t, 40, 3000)
	w := openAt(t, srv, front, "s3://"+bucket+"/p")
	for i := 0; i < len(v.Blobs); i += 1000 {
		if err := w.PutBlobs(ctx, v.Blobs[i:i+1000]); err != nil {
			t.Fatal(err)
		}
	}
	if n := count.take(); n["PUT"] != 6 || len(n) != 1 {
		t.Fatalf("pushing 3 batches of small blobs took %v requests, want 6 PUTs", n)
	}
	if packs, blobs := objectsUnder(t, srv, bucket+"/p/packs"), objectsUnder(t, srv, bucket+"/p/blobs"); packs != 6 || blobs != 0 {
		t.Fatalf("the bucket holds %d pack objects and %d blob objects, want 6 and 0", packs, blobs)
	}
	if _, err := w.PutManifest(ctx, v.Digest, v.Encoded); err != nil {
		t.Fatal(err)
	}
	count.take()
	r := openAt(t, srv, front, "s3://"+bucket+"/p")
	for i := 0; i < len(v.Blobs); i += 1000 {
		ds := make([]objects.Digest, 0, 1000)
		for _, b := range v.Blobs[i : i+1000] {
			ds = append(ds, b.Digest)
		}
		got, err := r.GetBlobs(ctx, ds)
		if err != nil {
			t.Fatal(err)
		}
		for j, b := range got {
			if objects.Sum(b) != ds[j] {
				t.Fatalf("blob %d read from its pack is wrong", i+j)
			}
		}
	}
	// One listing and three index reads, then one ranged GET a pack.
	if n := count.take(); n["GET"] > 8 || len(n) != 1 {
		t.Fatalf("reading 3,000 small blobs took %v requests, want at most 8 GETs", n)
	}
}

// TestGCPacks: gc keeps a pack while any blob in it is live, and a dead
// one while it is younger than the grace period; a client that had read the
// removed pack's index then finds its blobs gone, not a broken read.
func TestGCPacks(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.Bucket(t, "gc-packs")
	ctx := context.Background()
	u := "s3://" + bucket + "/p"
	r, other := openAt(t, srv, srv.Endpoint, u), openAt(t, srv, srv.Endpoint, u)
	live, dead := remotetest.MakeManySmall(t, 50, 300), remotetest.MakeManySmall(t, 51, 300)
	for _, batch := range [][]remote.Blob{
		append(append([]remote.Blob{}, live.Blobs[:100]...), dead.Blobs[:100]...), // mixed
		live.Blobs[100:], dead.Blobs[100:],
	} {
		if err := r.PutBlobs(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.PutManifest(ctx, live.Digest, live.Encoded); err != nil {
		t.Fatal(err)
	}
	if err := r.MoveRef(ctx, "m", objects.Digest{}, live.Digest, ""); err != nil {
		t.Fatal(err)
	}
	deadDigests := make([]objects.Digest, 0, 300)
	for _, b := range dead.Blobs {
		deadDigests = append(deadDigests, b.Digest)
	}
	if has, err := other.HasBlobs(ctx, deadDigests); err != nil || !has[0] || !has[299] {
		t.Fatalf("HasBlobs of the unreferenced packed blobs: %v", err)
	}

	p, err := r.PlanGC(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Delete) != 0 || len(p.KeptYoung) != 2 {
		t.Fatalf("plan with a grace of 1h: delete %v, keep young %v; want the dead pack and its index kept", p.Delete, p.KeptYoung)
	}
	if p, err = r.PlanGC(ctx, -1); err != nil {
		t.Fatal(err)
	}
	if len(p.Delete) != 2 || !strings.HasSuffix(p.Delete[0].Key, ".idx") && !strings.HasSuffix(p.Delete[1].Key, ".idx") {
		t.Fatalf("plan deletes %+v, want the dead pack and its index", p.Delete)
	}
	res, err := r.ExecuteGC(ctx, p)
	if err != nil || res.Deleted != 2 {
		t.Fatalf("gc: %+v, %v", res, err)
	}
	_, err = other.GetBlobs(ctx, deadDigests[100:110])
	if errs.ClassOf(err) != errs.NotFound {
		t.Fatalf("GetBlobs of blobs whose pack gc removed: %v, want not_found", err)
	}
	has, err := other.HasBlobs(ctx, deadDigests)
	if err != nil || !has[0] || has[100] {
		t.Fatalf("HasBlobs after gc: mixed pack %v, removed pack %v (%v); want true, false", has[0], has[100], err)
	}
	ds := make([]objects.Digest, 0, 300)
	for _, b := range live.Blobs {
		ds = append(ds, b.Digest)
	}
	if _, err := other.GetBlobs(ctx, ds); err != nil {
		t.Fatalf("a live blob is gone after gc: %v", err)
	}
}

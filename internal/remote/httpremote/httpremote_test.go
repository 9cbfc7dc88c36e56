package httpremote_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/remote/httpremote"
	"github.com/mstore/mstore/internal/remote/pathremote"
	"github.com/mstore/mstore/internal/remote/remotetest"
)

const token = "s3cret-token"

func serve(t *testing.T, o httpremote.ServerOptions) (*httptest.Server, remote.Remote) {
	t.Helper()
	return serveAt(t, filepath.Join(t.TempDir(), "served"), o)
}

// serveAt serves the store at dir.
func serveAt(t *testing.T, dir string, o httpremote.ServerOptions) (*httptest.Server, remote.Remote) {
	t.Helper()
	backend, err := pathremote.Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	o.Backend = backend
	srv := httptest.NewServer(httpremote.NewHandler(o))
	t.Cleanup(srv.Close)
	return srv, backend
}

func TestConformance(t *testing.T) {
	client := func(t *testing.T, url string) remote.Remote {
		c, err := httpremote.New(context.Background(), url, httpremote.ClientOptions{Token: token})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dirs := map[remote.Remote]string{} // each client's served store
	remotetest.Run(t, func(t *testing.T) remote.Remote {
		dir := filepath.Join(t.TempDir(), "served")
		srv, _ := serveAt(t, dir, httpremote.ServerOptions{AllowPush: true, PushToken: token})
		c := client(t, srv.URL)
		dirs[c] = dir
		return c
	}, remotetest.TwoClients(func(t *testing.T) (remote.Remote, remote.Remote) {
		srv, _ := serve(t, httpremote.ServerOptions{AllowPush: true, PushToken: token})
		return client(t, srv.URL), client(t, srv.URL)
	}), remotetest.Tamper(func(t *testing.T, r remote.Remote, _ remotetest.Fixture, d objects.Digest) {
		remotetest.DamageLoose(t, dirs[r], d)
	}))
}

func TestTokens(t *testing.T) {
	ctx := context.Background()
	v := remotetest.MakeVersion(t, 1, 100)
	srv, backend := serve(t, httpremote.ServerOptions{AllowPush: true, PushToken: token, ReadToken: "reader"})
	if _, err := httpremote.New(ctx, srv.URL, httpremote.ClientOptions{}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("read without a token: %v, want a 401", err)
	}
	reader, err := httpremote.New(ctx, srv.URL, httpremote.ClientOptions{Token: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	if err := reader.PutBlobs(ctx, v.Blobs); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("push with the read token: %v, want a 401", err)
	}
	wrong, err := httpremote.New(ctx, srv.URL, httpremote.ClientOptions{Token: token + "x"})
	if err == nil {
		err = wrong.PutBlobs(ctx, v.Blobs)
	}
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a wrong token: %v, want a 401", err)
	}
	if has, _ := backend.HasBlobs(ctx, []objects.Digest{v.Blobs[0].Digest}); has[0] {
		t.Fatal("a refused push stored a blob")
	}
	ro, _ := serve(t, httpremote.ServerOptions{})
	c, err := httpremote.New(ctx, ro.URL, httpremote.ClientOptions{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.PutBlobs(ctx, v.Blobs); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("push to a read-only server: %v", err)
	}
}

// TestNoTokenAfterRedirect: a server that redirects to another host (here
// another port) never sees the token.
func TestNoTokenAfterRedirect(t *testing.T) {
	var leaked atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Store(true)
		}
		http.Error(w, "nothing here", http.StatusNotFound)
	}))
	defer other.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	_, err := httpremote.New(context.Background(), redirector.URL, httpremote.ClientOptions{Token: token})
	if err == nil {
		t.Fatal("no error from a server that redirects to a 404")
	}
	if leaked.Load() {
		t.Fatal("the token was sent to another host after a redirect")
	}
}

// TestRetries: 503 with Retry-After and dropped connections are retried;
// a server that never answers is given up after the stall timeout.
func TestRetries(t *testing.T) {
	ctx := context.Background()
	backend, err := pathremote.Open(filepath.Join(t.TempDir(), "s"), true)
	if err != nil {
		t.Fatal(err)
	}
	h := httpremote.NewHandler(httpremote.ServerOptions{Backend: backend})
	var calls atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case 2:
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			conn.Close()
		default:
			h.ServeHTTP(w, r)
		}
	}))
	defer flaky.Close()
	start := time.Now()
	if _, err := httpremote.New(ctx, flaky.URL, httpremote.ClientOptions{}); err != nil {
		t.Fatalf("retried request failed: %v", err)
	}
	if calls.Load() != 3 || time.Since(start) < time.Second {
		t.Fatalf("%d calls in %s; want 3, after the Retry-After second", calls.Load(), time.Since(start))
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusBadGateway)
	}))
	defer down.Close()
	start = time.Now()
	_, err = httpremote.New(ctx, down.URL, httpremote.ClientOptions{StallTimeout: 1500 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "no answer") {
		t.Fatalf("a server that is down: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("gave up after %s, stall timeout 1.5 s", d)
	}
}

// TestRetryAfterCapped: a Retry-After of an hour (in seconds, or as an
// HTTP date) is waited only up to the client's cap.
func TestRetryAfterCapped(t *testing.T) {
	backend, err := pathremote.Open(filepath.Join(t.TempDir(), "s"), true)
	if err != nil {
		t.Fatal(err)
	}
	h := httpremote.NewHandler(httpremote.ServerOptions{Backend: backend})
	for _, after := range []string{"3600", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)} {
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				w.Header().Set("Retry-After", after)
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		}))
		start := time.Now()
		_, err := httpremote.New(context.Background(), srv.URL, httpremote.ClientOptions{MaxRetryAfter: 300 * time.Millisecond, StallTimeout: 10 * time.Second})
		srv.Close()
		if d := time.Since(start); err != nil || calls.Load() != 2 || d < 300*time.Millisecond || d > 5*time.Second {
			t.Fatalf("Retry-After %q: %v after %s and %d calls; want success after the 300 ms cap", after, err, d, calls.Load())
		}
	}
}

// blocking is a backend whose HasBlobs waits until released.
type blocking struct {
	remote.Remote
	entered chan struct{}
	release chan struct{}
}

func (b blocking) HasBlobs(ctx context.Context, ds []objects.Digest) ([]bool, error) {
	b.entered <- struct{}{}
	<-b.release
	return b.Remote.HasBlobs(ctx, ds)
}

// TestConcurrencyLimit: a request beyond the limit waits, then is told to
// come back later (503 with Retry-After) rather than queue without bound.
func TestConcurrencyLimit(t *testing.T) {
	backend, err := pathremote.Open(filepath.Join(t.TempDir(), "s"), true)
	if err != nil {
		t.Fatal(err)
	}
	b := blocking{Remote: backend, entered: make(chan struct{}, 1), release: make(chan struct{})}
	srv := httptest.NewServer(httpremote.NewHandler(httpremote.ServerOptions{Backend: b, MaxConcurrent: 1, QueueWait: 100 * time.Millisecond}))
	defer srv.Close()
	go http.Post(srv.URL+"/v1/blobs/has", "application/json", strings.NewReader(`{"digests":[]}`))
	<-b.entered
	resp, err := http.Get(srv.URL + "/v1/capabilities")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a request over the limit: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	close(b.release)
	resp, err = http.Get(srv.URL + "/v1/capabilities")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("after the slot is free: %d", resp.StatusCode)
	}
}

// TestBoundedHeaders: a request with 64 KiB of headers is refused.
func TestBoundedHeaders(t *testing.T) {
	backend, err := pathremote.Open(filepath.Join(t.TempDir(), "s"), true)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(httpremote.NewHandler(httpremote.ServerOptions{Backend: backend}))
	srv.Config = httpremote.NewServer(srv.Config.Handler)
	srv.Start()
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/v1/capabilities", nil)
	req.Header.Set("X-Padding", strings.Repeat("x", 64<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("64 KiB of headers: %d, want 431", resp.StatusCode)
	}
}

package e2e

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/zeebo/blake3"
)

func TestRemoteHTTP(t *testing.T) {
	t.Parallel()
	runRemoteScenarios(t, httpRemoteKind())
}

// httpDo sends one raw request to a server and returns status, headers and body.
func httpDo(t *testing.T, method, url, token string, body []byte, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func errorClass(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error struct{ Class string } `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("not a JSON error: %q", body)
	}
	return e.Error.Class
}

// TestServeProtocol checks the server's refusals and headers directly.
func TestServeProtocol(t *testing.T) {
	t.Parallel()
	fx, srv, _, _ := servedBase(t)
	served := &cli{t: t, store: srv.store}
	show := served.show("llm")
	var big string
	for _, tn := range show.Manifest.Tensors {
		if tn.Name == "lm_head.weight" {
			big = tn.Chunks[0]
		}
	}

	t.Run("capabilities", func(t *testing.T) {
		code, _, body := httpDo(t, "GET", srv.url+"/v1/capabilities", "", nil, nil)
		var caps struct {
			API      string   `json:"api"`
			Versions []int    `json:"versions"`
			Push     bool     `json:"push"`
			Codings  []string `json:"codings"`
		}
		if err := json.Unmarshal(body, &caps); code != 200 || err != nil || caps.API != "mstore" || !slices.Contains(caps.Versions, 1) ||
			!caps.Push || !slices.Contains(caps.Codings, "grouped") || !slices.Contains(caps.Codings, "delta") {
			t.Fatalf("capabilities: %d %s", code, body)
		}
	})

	t.Run("blobs: Range and an immutable cache header", func(t *testing.T) {
		code, hdr, body := httpDo(t, "GET", srv.url+"/v1/blobs/"+big, "", nil, map[string]string{"Range": "bytes=10-19"})
		if code != http.StatusPartialContent || len(body) != 10 || !strings.Contains(hdr.Get("Cache-Control"), "immutable") {
			t.Fatalf("ranged GET: %d, %d bytes, Cache-Control %q", code, len(body), hdr.Get("Cache-Control"))
		}
		code, _, body = httpDo(t, "GET", srv.url+"/v1/blobs/"+big, "", nil, nil)
		if sum := blake3.Sum256(body); code != 200 || len(body) != 4<<20 || hexOf(sum[:]) != big {
			t.Fatalf("GET: %d, %d bytes", code, len(body))
		}
		for _, bad := range []string{"../../index.db", strings.ToUpper(big), big[:20]} {
			if code, _, _ := httpDo(t, "GET", srv.url+"/v1/blobs/"+bad, "", nil, nil); code == 200 {
				t.Errorf("GET /v1/blobs/%s: 200", bad)
			}
		}
	})

	t.Run("a wrong-digest upload is refused", func(t *testing.T) {
		before := served.snapshot()
		data := []byte("these bytes are not what the digest names")
		lie := blake3.Sum256([]byte("other bytes"))
		frame := append(append(lie[:], binary.BigEndian.AppendUint64(nil, uint64(len(data)))...), data...)
		code, _, body := httpDo(t, "POST", srv.url+"/v1/blobs", testToken, frame, nil)
		if code != http.StatusUnprocessableEntity || errorClass(t, body) != "integrity_error" {
			t.Fatalf("upload under a wrong digest: %d %s", code, body)
		}
		served.requireUnchanged(before)
		code, _, body = httpDo(t, "POST", srv.url+"/v1/blobs/has", "", []byte(`{"digests":["`+hexOf(lie[:])+`"]}`), nil)
		if code != 200 || string(bytes.TrimSpace(body)) != `{"have":[false]}` {
			t.Fatalf("has after a refused upload: %d %s", code, body)
		}
	})

	t.Run("a manifest whose blobs are missing is refused", func(t *testing.T) {
		b := newCLI(t)
		added := b.add(fx.tuned, "--name", "ft")
		enc := showManifestBytes(t, b, "ft")
		before := served.snapshot()
		code, _, body := httpDo(t, "PUT", srv.url+"/v1/manifests/"+added.Digest, testToken, enc, nil)
		if code != http.StatusNotFound || errorClass(t, body) != "not_found" || !strings.Contains(string(body), `"missing"`) {
			t.Fatalf("manifest with missing blobs: %d %s", code, body)
		}
		served.requireUnchanged(before)
	})

	t.Run("bounded bodies", func(t *testing.T) {
		huge := bytes.Repeat([]byte(" "), 5<<20)
		if code, _, _ := httpDo(t, "POST", srv.url+"/v1/blobs/has", "", huge, nil); code != http.StatusRequestEntityTooLarge {
			t.Fatalf("a 5 MiB question: %d, want 413", code)
		}
		if code, _, body := httpDo(t, "GET", srv.url+"/v1/refs?name=../../etc", "", nil, nil); code != http.StatusBadRequest || errorClass(t, body) != "schema_error" {
			t.Fatalf("a ref name outside the grammar: %d %s", code, body)
		}
	})
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// showManifestBytes returns the canonical bytes of a version's manifest,
// pushed from a store by a path remote: the test's way to get them.
func showManifestBytes(t *testing.T, c *cli, name string) []byte {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "copy")
	c.ok("push", dir, name)
	r := execMstore(t, nil, "--store", dir, "--json", "show", name)
	if r.code != 0 {
		t.Fatal(r)
	}
	// The manifest's bytes are what hashes to its digest: read them from
	// the copy's index through the server protocol of a read-only serve.
	srv := startServe(t, dir, "127.0.0.1:0", nil)
	var s showResult
	decodeStrict(t, r, &s)
	code, _, body := httpDo(t, "GET", srv.url+"/v1/manifests/"+s.Digest, "", nil, nil)
	if code != 200 {
		t.Fatalf("GET manifest: %d %s", code, body)
	}
	return body
}

func TestPushNeedsToken(t *testing.T) {
	t.Parallel()
	fx := newRemoteFixture(t)
	srv := pushServer(t)
	a := newCLI(t)
	a.add(fx.base, "--name", "llm")
	a.ok("init")
	served := &cli{t: t, store: srv.store}
	served.ok("init")
	before := served.snapshot()
	for _, env := range [][]string{nil, {"MSTORE_TOKEN=wrong"}} {
		r := execMstore(t, env, "--store", a.store, "push", srv.url, "llm")
		if r.code != exitCodes["unauthorized"] || !strings.Contains(r.stderr, "unauthorized") || !strings.Contains(r.stderr, "401") {
			t.Fatalf("push without the right token: want unauthorized (exit %d) naming 401:\n%s", exitCodes["unauthorized"], r)
		}
	}
	served.requireUnchanged(before)
	// The token from a file works as MSTORE_TOKEN does.
	if res := a.transfer(nil, "push", srv.url, "llm", "--token-file", tokenFile(t)); !res.RefMoved {
		t.Fatalf("push with --token-file: %+v", res)
	}
	// --read-token-file: reading needs a token too.
	readTok := writeFile(t, filepath.Join(t.TempDir(), "read-token"), []byte("reader-token\n"))
	guarded := startServe(t, srv.store, "127.0.0.1:0", nil, "--read-token-file", readTok)
	b := newCLI(t)
	if r := execMstore(t, nil, "--store", b.store, "pull", guarded.url, "llm"); r.code != exitCodes["unauthorized"] || !strings.Contains(r.stderr, "401") {
		t.Fatalf("pull without the read token:\n%s", r)
	}
	b.transfer([]string{"MSTORE_TOKEN=reader-token"}, "pull", guarded.url, "llm")
	ro := startServe(t, filepath.Join(t.TempDir(), "ro"), "127.0.0.1:0", nil)
	r := execMstore(t, []string{"MSTORE_TOKEN=" + testToken}, "--store", a.store, "push", ro.url, "llm")
	if r.code == 0 || !strings.Contains(r.stderr, "read-only") {
		t.Fatalf("push to a read-only server:\n%s", r)
	}
}

func TestPullTamperedBlob(t *testing.T) {
	t.Parallel()
	_, srv, _, _ := servedBase(t)
	// Flip a byte of a loose blob in the served store.
	var victim string
	for _, f := range listFiles(t, filepath.Join(srv.store, "objects")) {
		if !strings.HasPrefix(f, "packs/") {
			victim = filepath.Join(srv.store, "objects", f)
			break
		}
	}
	if victim == "" {
		t.Fatal("no loose blob in the served store")
	}
	os.Chmod(victim, 0o644)
	b, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(victim, b, 0o444); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t)
	c.ok("init")
	before := c.snapshot()
	c.failEnv(nil, "integrity_error", "pull", srv.url, "llm")
	c.requireUnchanged(before)
}

func TestPullInterruptedThenResumed(t *testing.T) {
	t.Parallel()
	fx, srv, _, pushed := servedBase(t)

	b := newCLI(t)
	b.ok("init")
	p := b.start([]string{"MSTORE_FAILPOINT=pull-blobs-recorded:stop"},
		"pull", srv.url, "llm", "--checkpoint-bytes", "1", "--jobs", "1", "--timeout", "2s")
	p.waitStopped(t)
	srv.stop() // the server dies midway
	p.cmd.Process.Signal(syscall.SIGCONT)
	if out := p.wait(t); out.code == 0 || out.signal != 0 {
		t.Fatalf("pull with its server killed: %s\nstderr: %s", out, p.stderr.String())
	}
	if ls := b.ok("ls"); strings.Contains(ls, "llm") {
		t.Fatalf("an interrupted pull recorded a version:\n%s", ls)
	}
	first := b.du()
	if first.Blobs == 0 || first.Blobs >= pushed.BlobsMoved {
		t.Fatalf("after the interruption the store holds %d of %d blobs", first.Blobs, pushed.BlobsMoved)
	}
	again := startServe(t, srv.store, "127.0.0.1:0", nil)
	res := b.transfer(nil, "pull", again.url, "llm")
	if res.BlobsPresent != first.Blobs || res.BlobsMoved != pushed.BlobsMoved-first.Blobs || res.BytesMoved != pushed.BytesMoved-first.BlobBytes {
		t.Fatalf("resumed pull %+v; first pull kept %d blobs (%d bytes) of %d (%d bytes)", res, first.Blobs, first.BlobBytes, pushed.BlobsMoved, pushed.BytesMoved)
	}
	out := filepath.Join(t.TempDir(), "out")
	b.ok("checkout", "llm", out)
	requireSameTree(t, fx.base, out)
}

func TestRacingPushes(t *testing.T) {
	t.Parallel()
	fx := newRemoteFixture(t)
	srv := pushServer(t)
	env := []string{"MSTORE_TOKEN=" + testToken}
	a, b := newCLI(t), newCLI(t)
	da := a.add(fx.base, "--name", "llm").Digest
	db := b.add(fx.tuned, "--name", "llm").Digest
	pa := a.start(env, "push", srv.url, "llm")
	pb := b.start(env, "push", srv.url, "llm")
	oa, ob := pa.wait(t), pb.wait(t)
	won := map[bool]string{}
	switch {
	case oa.code == 0 && ob.code == exitCodes["conflict"]:
		won[true] = da
	case ob.code == 0 && oa.code == exitCodes["conflict"]:
		won[true] = db
	default:
		t.Fatalf("racing pushes: %s and %s, want one success and one conflict\n%s\n%s", oa, ob, pa.stderr.String(), pb.stderr.String())
	}
	served := &cli{t: t, store: srv.store}
	if got := served.show("llm").Digest; got != won[true] {
		t.Fatalf("the remote's llm is %s, the winner pushed %s", got, won[true])
	}
}

func TestConcurrentPulls(t *testing.T) {
	t.Parallel()
	fx, srv, _, _ := servedBase(t)
	b := newCLI(t)
	b.ok("init")
	p1 := b.start(nil, "pull", srv.url, "llm")
	p2 := b.start(nil, "pull", srv.url, "llm")
	if o1, o2 := p1.wait(t), p2.wait(t); o1.code != 0 || o2.code != 0 {
		t.Fatalf("concurrent pulls: %s, %s\n%s\n%s", o1, o2, p1.stderr.String(), p2.stderr.String())
	}
	if rep := b.fsck(); !rep.OK {
		t.Fatalf("fsck after concurrent pulls: %+v", rep)
	}
	out := filepath.Join(t.TempDir(), "out")
	b.ok("checkout", "llm", out)
	requireSameTree(t, fx.base, out)
}

func TestServeTLS(t *testing.T) {
	t.Parallel()
	fx := newRemoteFixture(t)
	cert, key := selfSignedCert(t)
	srv := startServe(t, filepath.Join(t.TempDir(), "served"), "127.0.0.1:0", nil,
		"--allow-push", "--token-file", tokenFile(t), "--tls-cert", cert, "--tls-key", key)
	if !strings.HasPrefix(srv.url, "https://") {
		t.Fatalf("TLS server URL %q", srv.url)
	}
	trust := "SSL_CERT_FILE=" + cert
	a, b := newCLI(t), newCLI(t)
	a.add(fx.base, "--name", "llm")
	a.transfer([]string{trust, "MSTORE_TOKEN=" + testToken}, "push", srv.url, "llm")
	b.transfer([]string{trust}, "pull", srv.url, "llm")
	out := filepath.Join(t.TempDir(), "out")
	b.ok("checkout", "llm", out)
	requireSameTree(t, fx.base, out)
	r := execMstore(t, nil, "--store", newCLI(t).store, "pull", srv.url, "llm", "--timeout", "1s")
	if r.code == 0 || !strings.Contains(r.stderr, "certificate") {
		t.Fatalf("pull from a server whose certificate is not trusted:\n%s", r)
	}
}

// TestPullThroughProxy: HTTP_PROXY is honoured. The remote's host name
// does not resolve; only the proxy (a test server here, forwarding to
// serve) knows where it is.
func TestPullThroughProxy(t *testing.T) {
	t.Parallel()
	_, srv, _, _ := servedBase(t)
	target, err := url.Parse(srv.url)
	if err != nil {
		t.Fatal(err)
	}
	var proxied atomic.Int64
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Host != "models.mstore-test.invalid" {
			http.Error(w, "not a proxy request for the test host: "+r.URL.String(), http.StatusBadGateway)
			return
		}
		proxied.Add(1)
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	b := newCLI(t)
	res := b.transfer([]string{"HTTP_PROXY=" + proxy.URL, "NO_PROXY="}, "pull", "http://models.mstore-test.invalid", "llm")
	if res.BlobsMoved == 0 || proxied.Load() == 0 {
		t.Fatalf("pull through a proxy: %+v, %d proxied requests", res, proxied.Load())
	}
}

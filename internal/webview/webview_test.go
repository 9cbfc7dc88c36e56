package webview_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/remote/httpremote"
	"github.com/mstore/mstore/internal/remote/pathremote"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
	"github.com/mstore/mstore/internal/webview"
)

// hostile are tensor names a model file may carry to attack a page that
// shows them.
var hostile = []string{`<script>alert("x")</script>`, `"><img src=x onerror=alert(1)>`, `</td></tr></table><h1>injected</h1>`}

// served is a store with two versions of acme/m (the second adds one
// tensor), the first tagged v1, behind the handler serve runs: the /v1/
// protocol with the web view.
func served(t *testing.T, tensors int) (*httptest.Server, *store.Store) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "store"), true, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ts []formats.Tensor
	for i := range tensors {
		name := fmt.Sprintf("layers.%04d.weight", i)
		if i < len(hostile) {
			name = hostile[i]
		}
		ts = append(ts, formats.Tensor{Name: name, DType: "F32", Shape: []int64{4}, Size: 16})
	}
	for i, v := range [][]formats.Tensor{ts, append(ts, formats.Tensor{Name: "zz.added", DType: "F32", Shape: []int64{2}, Size: 8})} {
		dir := filepath.Join(t.TempDir(), "m")
		if err := testmodel.WriteTensors(dir, v, 0, 7); err != nil {
			t.Fatal(err)
		}
		opts := archiver.Options{Name: "acme/m"}
		if i == 0 {
			opts.Tag = "v1"
		}
		if _, err := archiver.Add(context.Background(), st, dir, opts); err != nil {
			t.Fatal(err)
		}
	}
	h := httpremote.NewHandler(httpremote.ServerOptions{Backend: pathremote.New(st), Web: webview.New(st)})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, st
}

func get(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// TestPages: every page answers with HTML under a CSP that allows no
// script, shows what it should, escapes the hostile names, cuts the tensor
// list into pages, and leaves the /v1/ protocol as it was.
func TestPages(t *testing.T) {
	n := 2*webview.PageSize + 50
	srv, st := served(t, n)
	d, _, err := names.Load(st, "acme/m")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path   string
		status int
		want   []string
		rows   int // <tr> in #tensors, or -1
	}{
		{"/", 200, []string{"acme/m", "acme/m:v1", "dedup"}, -1},
		{"/ref?name=acme/m", 200, []string{"acme/m~0", "acme/m~1", "v1", "diff with previous"}, -1},
		{"/version?v=acme/m", 200, []string{d.String(), "page 1 of 3", "held by", "acme/m"}, webview.PageSize},
		{"/version?v=acme/m&page=3", 200, []string{"page 3 of 3", "zz.added"}, n + 1 - 2*webview.PageSize},
		{"/version?v=" + d.String()[:12], 200, []string{d.String()}, webview.PageSize},
		{"/diff?from=acme/m:v1&to=acme/m", 200, []string{"zz.added", "added"}, -1},
		{"/version?v=acme/m&page=4", 404, []string{"not_found"}, -1},
		{"/version?v=nosuch", 404, []string{"not_found", "nosuch"}, -1},
		{"/version?v=../x", 400, []string{"schema_error"}, -1},
		{"/version", 400, []string{"schema_error"}, -1},
		{"/nosuch", 404, []string{"not_found"}, -1},
		// A ref name cannot hold markup, but a URL can: the error page
		// quotes it escaped.
		{"/ref?name=%3Cscript%3Ealert(1)%3C/script%3E", 400, []string{"schema_error", "&lt;script&gt;"}, -1},
		{"/version?v=acme/m%3A%3Cimg%20src=x%3E", 400, []string{"schema_error"}, -1},
		{"/%3Cscript%3E", 404, []string{"not_found"}, -1},
	} {
		t.Run(tc.path, func(t *testing.T) {
			status, h, body := get(t, srv.URL+tc.path)
			if status != tc.status {
				t.Fatalf("status %d, want %d\n%s", status, tc.status, body)
			}
			if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			if !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
				t.Errorf("Content-Type %q", h.Get("Content-Type"))
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("page lacks %q", w)
				}
			}
			for _, bad := range []string{"<script", "<img", "<h1>injected"} {
				if strings.Contains(body, bad) {
					t.Errorf("page holds %q: a name was not escaped", bad)
				}
			}
			if tc.rows >= 0 {
				_, table, _ := strings.Cut(body, `id="tensors"`)
				table, _, _ = strings.Cut(table, "</table>")
				if got := strings.Count(table, "<tr>") - 1; got != tc.rows {
					t.Errorf("%d tensor rows, want %d", got, tc.rows)
				}
			}
		})
	}
	_, _, page1 := get(t, srv.URL+"/version?v=acme/m")
	if !strings.Contains(page1, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") {
		t.Errorf("the hostile tensor name is not shown escaped on the version page")
	}

	// The protocol is the same with the view mounted.
	status, _, caps := get(t, srv.URL+"/v1/capabilities")
	if status != 200 || !strings.Contains(caps, `"api":"mstore"`) {
		t.Errorf("/v1/capabilities: %d %s", status, caps)
	}
	if status, _, body := get(t, srv.URL+"/v1/nosuch"); status != 404 || !strings.Contains(body, `"not_found"`) {
		t.Errorf("/v1/nosuch: %d %s, want the protocol's JSON not_found", status, body)
	}
	resp, err := http.Post(srv.URL+"/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("POST /: %d, want 404 (the view only answers GET)", resp.StatusCode)
	}
}

package httpremote_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/remote/httpremote"
	"github.com/mstore/mstore/internal/remote/pathremote"
)

// TestStallTimeoutIsAboutProgress: the stall timeout cuts off an answer
// that stops moving, not one that is slow. A blob sent in pieces over
// three times the timeout arrives whole; one whose sender goes quiet
// fails within a few timeouts, saying no byte arrived.
func TestStallTimeoutIsAboutProgress(t *testing.T) {
	backend, err := pathremote.Open(filepath.Join(t.TempDir(), "s"), true)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(strings.Repeat("weights!", 4096)) // 32 KiB
	d := objects.Sum(data)
	if err := backend.PutBlobs(context.Background(), []remote.Blob{{Digest: d, Data: data}}); err != nil {
		t.Fatal(err)
	}
	h := httpremote.NewHandler(httpremote.ServerOptions{Backend: backend})
	const stall = 300 * time.Millisecond
	for _, tc := range []struct {
		name  string
		quiet bool // the sender stops after the first piece
	}{{"slow but moving", false}, {"gone quiet", true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasPrefix(r.URL.Path, "/v1/blobs/"+d.String()) {
					h.ServeHTTP(w, r)
					return
				}
				w.Header().Set("Content-Length", "32768")
				for i := 0; i < 8; i++ { // 8 pieces, 120 ms apart: ~1 s in all
					if _, err := w.Write(data[i*4096 : (i+1)*4096]); err != nil {
						return
					}
					w.(http.Flusher).Flush()
					if tc.quiet && i == 0 {
						select {
						case <-r.Context().Done():
						case <-time.After(10 * stall):
						}
						return
					}
					time.Sleep(stall * 2 / 5)
				}
			}))
			defer srv.Close()
			c, err := httpremote.New(context.Background(), srv.URL, httpremote.ClientOptions{StallTimeout: stall})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			got, err := c.GetBlob(context.Background(), d, 0, -1)
			took := time.Since(start)
			if !tc.quiet {
				if err != nil || string(got) != string(data) {
					t.Fatalf("a slow answer that kept moving: %v after %s (%d bytes); want the whole blob", err, took, len(got))
				}
				if took < 2*stall {
					t.Fatalf("took %s: the test's answer is meant to outlast the stall timeout", took)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "no byte arrived") {
				t.Fatalf("an answer that went quiet: %v after %s; want the stall named", err, took)
			}
			if took > 8*stall {
				t.Fatalf("gave up after %s; want within a few stall timeouts (%s)", took, stall)
			}
		})
	}
}

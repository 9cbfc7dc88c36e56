package s3remote_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote/remotetest"
	"github.com/mstore/mstore/internal/remote/s3remote"
)

// careless is an object store that ignores If-None-Match and If-Match.
type careless struct {
	mu   sync.Mutex
	objs map[string][]byte
}

func (c *careless) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := r.URL.Path
	if r.Method == "GET" && r.URL.Query().Get("list-type") == "2" {
		c.list(w, strings.TrimPrefix(key, "/")+"/", r.URL.Query().Get("prefix"))
		return
	}
	switch r.Method {
	case "PUT":
		b, _ := io.ReadAll(r.Body)
		c.objs[key] = b
		sum := md5.Sum(b)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
	case "GET", "HEAD":
		b, ok := c.objs[key]
		if !ok {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotFound)
			if r.Method == "GET" {
				io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>no</Message></Error>`)
			}
			return
		}
		sum := md5.Sum(b)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
		w.Header().Set("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		if r.Method == "GET" {
			w.Write(b)
		}
	case "DELETE":
		delete(c.objs, key)
		w.WriteHeader(http.StatusNoContent)
	}
}

// list answers a ListObjectsV2 of bucket/prefix*, in one page.
func (c *careless) list(w http.ResponseWriter, bucket, prefix string) {
	var keys []string
	for k := range c.objs {
		if rest, ok := strings.CutPrefix(k, "/"+bucket); ok && strings.HasPrefix(rest, prefix) {
			keys = append(keys, rest)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><IsTruncated>false</IsTruncated>`)
	for _, k := range keys {
		fmt.Fprintf(&b, "<Contents><Key>%s</Key><Size>%d</Size><LastModified>2006-01-02T15:04:05.000Z</LastModified></Contents>", k, len(c.objs["/"+bucket+k]))
	}
	b.WriteString("</ListBucketResult>")
	w.Header().Set("Content-Type", "application/xml")
	io.WriteString(w, b.String())
}

// TestServerIgnoringConditions: ref moves and tags are refused, with a
// message that says why, on a server that ignores conditional writes.
func TestServerIgnoringConditions(t *testing.T) {
	srv := httptest.NewServer(&careless{objs: map[string][]byte{}})
	defer srv.Close()
	r, err := s3remote.Open("s3://bucket/p", s3remote.Options{Endpoint: srv.URL, AccessKey: "a", SecretKey: "b"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	v := remotetest.MakeVersion(t, 1, 1000)
	if err := r.PutBlobs(ctx, v.Blobs); err != nil {
		t.Fatal(err)
	}
	if _, err := r.PutManifest(ctx, v.Digest, v.Encoded); err != nil {
		t.Fatal(err)
	}
	err = r.MoveRef(ctx, "m", objects.Digest{}, v.Digest, "")
	if errs.ClassOf(err) != errs.UnsupportedVersion || !strings.Contains(err.Error(), "ignores conditional writes") {
		t.Fatalf("MoveRef on a server that ignores conditions: %v", err)
	}
	if _, err := r.CreateTag(ctx, "m", "v1", v.Digest); errs.ClassOf(err) != errs.UnsupportedVersion || !strings.Contains(err.Error(), "ignores conditional writes") {
		t.Fatalf("CreateTag on a server that ignores conditions: %v", err)
	}
	if _, err := r.Ref(ctx, "m"); err == nil {
		t.Fatal("a refused move left a ref")
	}
}

package s3remote_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/remote/remotetest"
	"github.com/mstore/mstore/internal/remote/s3remote"
	"github.com/mstore/mstore/internal/remote/s3remote/s3test"
)

func TestConformance(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.Bucket(t, "conformance")
	var n atomic.Int32
	open := func(t *testing.T, url string) remote.Remote {
		r, err := s3remote.Open(url, s3remote.Options{Endpoint: srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Each remote is its own prefix of one bucket.
	fresh := func() string { return fmt.Sprintf("run%d/models", n.Add(1)) }
	url := func(prefix string) string { return "s3://" + bucket + "/" + prefix }
	prefixes := map[remote.Remote]string{}
	// damage flips a byte in the middle of blob d's object, in the folder
	// versitygw's posix backend keeps the bucket in.
	damage := func(t *testing.T, r remote.Remote, _ remotetest.Fixture, d objects.Digest) {
		h := d.String()
		remotetest.FlipByte(t, filepath.Join(srv.Dir, bucket, prefixes[r], "blobs", h[:2], h), -1)
	}
	remotetest.Run(t, func(t *testing.T) remote.Remote {
		p := fresh()
		r := open(t, url(p))
		prefixes[r] = p
		return r
	}, remotetest.TwoClients(func(t *testing.T) (remote.Remote, remote.Remote) {
		u := url(fresh())
		return open(t, u), open(t, u)
	}), remotetest.Tamper(damage))
}

// TestHasBlobsByListing: many questions about one fan-out folder are
// answered from a listing of it, with the same answers.
func TestHasBlobsByListing(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.Bucket(t, "listing")
	r, err := s3remote.Open("s3://"+bucket+"/p", s3remote.Options{Endpoint: srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	var blobs []remote.Blob
	for i := 0; len(blobs) < 60; i++ {
		data := []byte(fmt.Sprint("blob ", i))
		if d := objects.Sum(data); d[0] == 0 {
			blobs = append(blobs, remote.Blob{Digest: d, Data: data})
		}
	}
	ctx := context.Background()
	if err := r.PutBlobs(ctx, blobs[:30]); err != nil {
		t.Fatal(err)
	}
	var ds []objects.Digest
	for _, b := range blobs {
		ds = append(ds, b.Digest)
	}
	has, err := r.HasBlobs(ctx, ds)
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range has {
		if ok != (i < 30) {
			t.Fatalf("HasBlobs[%d] = %v", i, ok)
		}
	}
}

// TestUnauthorized: an object store refusing the credentials (an unknown
// key, a wrong secret) is unauthorized on every kind of request, never an
// io_error or a not_found (versitygw answers an unknown key's HEAD with a
// bare 404: HasBlobs then says "absent", and the PutBlobs that follows is
// refused).
func TestUnauthorized(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.Bucket(t, "creds")
	v := remotetest.MakeVersion(t, 1, 1000)
	for _, c := range []struct{ what, access, secret string }{
		{"unknown access key", "nobody-" + srv.AccessKey, srv.SecretKey},
		{"wrong secret", srv.AccessKey, srv.SecretKey + "x"},
	} {
		t.Run(c.what, func(t *testing.T) {
			r, err := s3remote.Open("s3://"+bucket+"/p", s3remote.Options{Endpoint: srv.Endpoint, AccessKey: c.access, SecretKey: c.secret})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			check := func(op string, err error) {
				t.Helper()
				if errs.ClassOf(err) != errs.Unauthorized {
					t.Errorf("%s with a %s: %v (class %v), want unauthorized", op, c.what, err, errs.ClassOf(err))
				}
			}
			_, err = r.GetBlob(ctx, v.Blobs[0].Digest, 0, -1)
			check("GetBlob", err)
			check("PutBlobs", r.PutBlobs(ctx, v.Blobs))
			_, err = r.GetManifest(ctx, v.Digest)
			check("GetManifest", err)
			_, err = r.Ref(ctx, "m")
			check("Ref", err)
			_, err = r.Tag(ctx, "m", "v1")
			check("Tag", err)
		})
	}
}

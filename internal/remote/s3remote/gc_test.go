package s3remote_test

import (
	"context"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote/remotetest"
	"github.com/mstore/mstore/internal/remote/s3remote"
	"github.com/mstore/mstore/internal/remote/s3remote/s3test"
)

func TestGC(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.Bucket(t, "gc-test")
	r, err := s3remote.Open("s3://"+bucket+"/p", s3remote.Options{Endpoint: srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	put := func(v remotetest.Version, manifest bool) {
		t.Helper()
		if err := r.PutBlobs(ctx, v.Blobs); err != nil {
			t.Fatal(err)
		}
		if manifest {
			if _, err := r.PutManifest(ctx, v.Digest, v.Encoded); err != nil {
				t.Fatal(err)
			}
		}
	}
	v1, v2 := remotetest.MakeVersion(t, 1, 5<<20), remotetest.MakeVersion(t, 2, 1000)
	tagged := remotetest.MakeVersion(t, 3, 2000)
	orphanBlobs, orphanManifest := remotetest.MakeVersion(t, 4, 3000), remotetest.MakeVersion(t, 5, 4000)
	put(v1, true)
	put(v2, true)
	put(tagged, true)
	put(orphanBlobs, false)
	put(orphanManifest, true)
	if err := r.MoveRef(ctx, "m", objects.Digest{}, v1.Digest, ""); err != nil {
		t.Fatal(err)
	}
	if err := r.MoveRef(ctx, "m", v1.Digest, v2.Digest, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := r.CreateTag(ctx, "other", "v1", tagged.Digest); err != nil {
		t.Fatal(err)
	}

	// Everything unreferenced is young: a push may be in flight.
	p, err := r.PlanGC(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Delete) != 0 || len(p.KeptYoung) != 1 { // only orphanBlobs: orphanManifest is a young root
		t.Fatalf("plan with a grace of 1h: delete %v, keep young %v", p.Delete, p.KeptYoung)
	}

	p, err = r.PlanGC(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, b := range orphanBlobs.Blobs {
		want[b.Digest.String()] = true
	}
	for _, b := range orphanManifest.Blobs {
		want[b.Digest.String()] = true
	}
	want[orphanManifest.Digest.String()] = true
	if len(p.Delete) != len(want) {
		t.Fatalf("plan deletes %d objects, want %d: %+v", len(p.Delete), len(want), p.Delete)
	}
	for _, o := range p.Delete {
		if !want[o.Key[len(o.Key)-64:]] {
			t.Fatalf("plan deletes %s, which is live", o.Key)
		}
	}
	// The orphan manifest gets a ref between plan and execution: spared.
	if err := r.MoveRef(ctx, "late", objects.Digest{}, orphanManifest.Digest, ""); err != nil {
		t.Fatal(err)
	}
	res, err := r.ExecuteGC(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != len(orphanBlobs.Blobs) || res.Spared != 1+len(orphanManifest.Blobs) {
		t.Fatalf("gc: %+v; want %d deleted and the late version spared", res, len(orphanBlobs.Blobs))
	}
	for _, v := range []remotetest.Version{v1, v2, tagged, orphanManifest} {
		for _, b := range v.Blobs {
			if got, err := r.GetBlob(ctx, b.Digest, 0, -1); err != nil || len(got) != len(b.Data) {
				t.Fatalf("a live blob is gone after gc: %v", err)
			}
		}
		if _, err := r.GetManifest(ctx, v.Digest); err != nil {
			t.Fatalf("a live manifest is gone after gc: %v", err)
		}
	}
	has, _ := r.HasBlobs(ctx, []objects.Digest{orphanBlobs.Blobs[0].Digest})
	if has[0] {
		t.Fatal("an unreferenced blob survived gc")
	}
}

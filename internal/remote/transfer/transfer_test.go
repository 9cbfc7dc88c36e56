package transfer

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/remote/pathremote"
	"github.com/mstore/mstore/internal/remote/remotetest"
	"github.com/mstore/mstore/internal/store"
)

// lying is a remote that flips a byte of every blob it sends: the pull,
// not the remote, must catch it.
type lying struct{ remote.Remote }

func (l lying) GetBlob(ctx context.Context, d objects.Digest, off, n int64) ([]byte, error) {
	b, err := l.Remote.GetBlob(ctx, d, off, n)
	if err == nil && len(b) > 0 {
		b = bytes.Clone(b)
		b[len(b)/2] ^= 1
	}
	return b, err
}

func (l lying) GetBlobs(ctx context.Context, ds []objects.Digest) ([][]byte, error) {
	bs, err := l.Remote.GetBlobs(ctx, ds)
	for i := range bs {
		bs[i] = bytes.Clone(bs[i])
		bs[i][0] ^= 1
	}
	return bs, err
}

func served(t testing.TB, sizes ...int64) (remote.Remote, []remotetest.Version) {
	t.Helper()
	ctx := context.Background()
	r, err := pathremote.Open(filepath.Join(t.TempDir(), "remote"), true)
	if err != nil {
		t.Fatal(err)
	}
	var vs []remotetest.Version
	var from objects.Digest
	for i, size := range sizes {
		v := remotetest.MakeVersion(t, uint64(i+1), size)
		for k := 0; k < len(v.Blobs); k += 4 { // under remote.MaxBatchBytes
			if err := r.PutBlobs(ctx, v.Blobs[k:min(k+4, len(v.Blobs))]); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := r.PutManifest(ctx, v.Digest, v.Encoded); err != nil {
			t.Fatal(err)
		}
		if err := r.MoveRef(ctx, "m", from, v.Digest, ""); err != nil {
			t.Fatal(err)
		}
		from = v.Digest
		vs = append(vs, v)
	}
	return r, vs
}

func TestPullVerifiesEveryBlob(t *testing.T) {
	for _, size := range []int64{1000, 5 << 20} { // a batch of small blobs; a large one alone
		r, _ := served(t, size)
		st, err := store.Open(filepath.Join(t.TempDir(), "local"), true, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = Pull(context.Background(), st, lying{r}, PullOptions{Version: "m"})
		if errs.ClassOf(err) != errs.IntegrityError {
			t.Fatalf("pull of altered bytes (%d): %v, want integrity_error", size, err)
		}
		st.View(func(tx *bolt.Tx) error {
			n := 0
			store.ForEachBlob(tx, func(store.BlobRecord) error { n++; return nil })
			store.ForEachManifest(tx, func(objects.Digest) error { n++; return nil })
			if n != 0 {
				t.Errorf("a refused pull recorded %d blobs or manifests", n)
			}
			return nil
		})
	}
}

func TestPinnedPull(t *testing.T) {
	r, vs := served(t, 100, 200)
	other, _ := served(t, 300)
	st, err := store.Open(filepath.Join(t.TempDir(), "local"), true, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := Pull(ctx, st, r, PullOptions{Version: "m@" + vs[0].Digest.String()[:10]})
	if err != nil || res.Digest != vs[0].Digest {
		t.Fatalf("pinned pull of the first version: %+v, %v", res, err)
	}
	info, _ := other.Ref(ctx, "m")
	_, err = Pull(ctx, st, r, PullOptions{Version: "m@" + info.Current.String()})
	if errs.ClassOf(err) != errs.NotFound {
		t.Fatalf("pinned pull of a digest outside the history: %v, want not_found", err)
	}
}

func TestPlanJobs(t *testing.T) {
	sizes := map[objects.Digest]int64{}
	var ds []objects.Digest
	for i := range 100_000 {
		d := objects.Sum([]byte{byte(i), byte(i >> 8), byte(i >> 16)})
		ds = append(ds, d)
		sizes[d] = 256
	}
	big := objects.Sum([]byte("big"))
	ds = append(ds, big)
	sizes[big] = objects.ChunkSize
	jobs := planJobs(ds, sizes)
	if len(jobs) > 30 {
		t.Fatalf("100,000 small blobs in %d requests", len(jobs))
	}
	n := 0
	for _, j := range jobs {
		n += len(j.blobs)
		if j.batch && (j.bytes > batchBytes || len(j.blobs) > remote.MaxBatchBlobs) {
			t.Fatalf("a batch over its bounds: %d blobs, %d bytes", len(j.blobs), j.bytes)
		}
	}
	if n != len(ds) {
		t.Fatalf("jobs hold %d blobs of %d", n, len(ds))
	}
}

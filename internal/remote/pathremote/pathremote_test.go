package pathremote_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/remote/pathremote"
	"github.com/mstore/mstore/internal/remote/remotetest"
)

func TestConformance(t *testing.T) {
	dirs := map[remote.Remote]string{}
	open := func(t *testing.T, dir string) remote.Remote {
		r, err := pathremote.Open(dir, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		dirs[r] = dir
		return r
	}
	damage := func(t *testing.T, r remote.Remote, _ remotetest.Fixture, d objects.Digest) {
		remotetest.DamageLoose(t, dirs[r], d)
	}
	remotetest.Run(t, func(t *testing.T) remote.Remote {
		return open(t, filepath.Join(t.TempDir(), "remote"))
	}, remotetest.TwoClients(func(t *testing.T) (remote.Remote, remote.Remote) {
		dir := filepath.Join(t.TempDir(), "remote")
		return open(t, dir), open(t, dir)
	}), remotetest.Tamper(damage))
}

// smallBlobs makes n small blobs of distinct sizes and bytes.
func smallBlobs(n int, seed byte) []remote.Blob {
	out := make([]remote.Blob, n)
	for i := range out {
		b := make([]byte, 1+i*53%2000)
		for k := range b {
			b[k] = byte(i*7+k) ^ seed
		}
		out[i] = remote.Blob{Digest: objects.Sum(b), Data: b}
	}
	return out
}

// A batch of many small blobs comes back blob for blob, in the order
// asked, however the store's packs hold them; one altered blob anywhere in
// a batch sent (the last, here) fails the batch, as an integrity_error,
// and nothing of it is stored.
func TestManySmallBlobs(t *testing.T) {
	ctx := context.Background()
	r, err := pathremote.Open(filepath.Join(t.TempDir(), "remote"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	blobs := smallBlobs(1500, 0)
	for k := 0; k < len(blobs); k += 500 {
		if err := r.PutBlobs(ctx, blobs[k:k+500]); err != nil {
			t.Fatal(err)
		}
	}
	var ask []objects.Digest
	for i := range blobs {
		ask = append(ask, blobs[(i*389)%len(blobs)].Digest) // every blob, out of order
	}
	ask = append(ask, blobs[5].Digest)
	got, err := r.GetCoded(ctx, ask, pathremote.StoreCodings())
	if err != nil {
		t.Fatal(err)
	}
	byDigest := map[objects.Digest][]byte{}
	for _, b := range blobs {
		byDigest[b.Digest] = b.Data
	}
	for i, b := range got {
		if b.Digest != ask[i] || b.Coding != remote.CodingRaw || !bytes.Equal(b.Data, byDigest[ask[i]]) {
			t.Fatalf("blob %d of the batch: %s %s %d bytes; want %s raw, its own bytes", i, b.Digest.Short(), b.Coding, len(b.Data), ask[i].Short())
		}
	}

	fresh := smallBlobs(300, 0x55)
	fresh[len(fresh)-1].Data = bytes.Clone(fresh[len(fresh)-1].Data)
	fresh[len(fresh)-1].Data[0] ^= 1
	if err := r.PutBlobs(ctx, fresh); errs.ClassOf(err) != errs.IntegrityError {
		t.Fatalf("PutBlobs with its last blob altered: %v; want an integrity_error", err)
	}
	coded := make([]remote.CodedBlob, len(fresh))
	for i, b := range fresh {
		coded[i] = remote.CodedBlob{Digest: b.Digest, Size: int64(len(b.Data)), Coding: remote.CodingRaw, Data: b.Data}
	}
	if _, err := r.PutCoded(ctx, coded); errs.ClassOf(err) != errs.IntegrityError {
		t.Fatalf("PutCoded with its last blob altered: %v; want an integrity_error", err)
	}
	ds := make([]objects.Digest, len(fresh))
	for i, b := range fresh {
		ds[i] = b.Digest
	}
	has, err := r.HasBlobs(ctx, ds)
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range has {
		if ok {
			t.Fatalf("blob %d of a refused batch was stored", i)
		}
	}
}

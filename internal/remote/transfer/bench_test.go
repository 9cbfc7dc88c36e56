package transfer

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/remote/pathremote"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

// BenchmarkPullFromServe pulls a version of 64 MiB (16 chunks) from
// serve's handler over loopback HTTP into an empty store, as `mstore pull
// http://…` does: the requests, each blob verified, written and made
// durable, the version recorded.
func BenchmarkPullFromServe(b *testing.B) {
	const size = 64 << 20
	backend, _ := served(b, size)
	r := serveHTTP(b, backend)
	b.SetBytes(size)
	pullEach(b, r)
}

// pullEach pulls version m of r into a new store each time round the
// benchmark's loop, the store made and removed untimed.
func pullEach(b *testing.B, r remote.Remote) {
	dir := b.TempDir()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		into := filepath.Join(dir, strconv.Itoa(i))
		st, err := store.Open(into, true, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := Pull(context.Background(), st, r, PullOptions{Version: "m"}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		os.RemoveAll(into)
		b.StartTimer()
	}
}

// BenchmarkPullSmallTensors pulls a model of 100,000 tensors of 512 B from
// another store on this machine (a file remote), as `mstore pull DIR`
// does, into an empty store: MB/s of tensor data and allocations per
// tensor. The remote's blobs are a few packs, which a pull reads a run at
// a time (store.BlobReader.ReadRaw).
func BenchmarkPullSmallTensors(b *testing.B) {
	i := slices.IndexFunc(testmodel.BenchModels(), func(m testmodel.BenchModel) bool { return m.Name == "small-100k" })
	m := testmodel.BenchModels()[i]
	dir := filepath.Join(b.TempDir(), "model")
	if err := testmodel.WriteTensors(dir, m.Tensors, m.Shard, 1); err != nil {
		b.Fatal(err)
	}
	src, err := store.Open(filepath.Join(b.TempDir(), "src"), true, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := archiver.Add(context.Background(), src, dir, archiver.Options{Name: "m"}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(m.Bytes())
	var allocs testmodel.AllocCounter
	allocs.Start()
	pullEach(b, pathremote.New(src))
	b.StopTimer()
	allocs.Report(b, len(m.Tensors))
}

package transfer

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/mstore/mstore/internal/store"
)

// BenchmarkPullFromServe pulls a version of 64 MiB (16 chunks) from
// serve's handler over loopback HTTP into an empty store, as `mstore pull
// http://…` does: the requests, each blob verified, written and made
// durable, the version recorded.
func BenchmarkPullFromServe(b *testing.B) {
	const size = 64 << 20
	backend, _ := served(b, size)
	r := serveHTTP(b, backend)
	dir := b.TempDir()
	b.SetBytes(size)
	for i := 0; b.Loop(); i++ {
		b.StopTimer() // a new store each time, made and removed untimed
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

package pathremote_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/remote/pathremote"
	"github.com/mstore/mstore/internal/remote/remotetest"
	"github.com/mstore/mstore/internal/store"
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
	// damage flips a byte in the middle of the loose file of blob d.
	damage := func(t *testing.T, r remote.Remote, _ remotetest.Fixture, d objects.Digest) {
		st, err := store.Open(dirs[r], false, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		p := st.BlobPath(d)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0x40
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	remotetest.Run(t, func(t *testing.T) remote.Remote {
		return open(t, filepath.Join(t.TempDir(), "remote"))
	}, remotetest.TwoClients(func(t *testing.T) (remote.Remote, remote.Remote) {
		dir := filepath.Join(t.TempDir(), "remote")
		return open(t, dir), open(t, dir)
	}), remotetest.Tamper(damage))
}

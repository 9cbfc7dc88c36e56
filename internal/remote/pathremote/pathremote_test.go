package pathremote_test

import (
	"path/filepath"
	"testing"

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

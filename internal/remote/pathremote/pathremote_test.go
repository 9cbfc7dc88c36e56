package pathremote_test

import (
	"path/filepath"
	"testing"

	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/remote/pathremote"
	"github.com/mstore/mstore/internal/remote/remotetest"
)

func TestConformance(t *testing.T) {
	open := func(t *testing.T, dir string) remote.Remote {
		r, err := pathremote.Open(dir, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	remotetest.Run(t, func(t *testing.T) remote.Remote {
		return open(t, filepath.Join(t.TempDir(), "remote"))
	}, remotetest.TwoClients(func(t *testing.T) (remote.Remote, remote.Remote) {
		dir := filepath.Join(t.TempDir(), "remote")
		return open(t, dir), open(t, dir)
	}))
}

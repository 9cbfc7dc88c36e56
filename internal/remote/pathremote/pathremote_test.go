package pathremote_test

import (
	"path/filepath"
	"testing"

	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/remote/pathremote"
	"github.com/mstore/mstore/internal/remote/remotetest"
)

func TestConformance(t *testing.T) {
	remotetest.Run(t, func(t *testing.T) remote.Remote {
		r, err := pathremote.Open(filepath.Join(t.TempDir(), "remote"), true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	})
}

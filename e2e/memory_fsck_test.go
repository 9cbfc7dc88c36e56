package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/mstore/mstore/internal/testmodel"
)

// fsckManyVersions is how many versions of 100,000 new blobs of 512 B
// TestMemoryFsckManyVersions puts in one store: 600,000 blob records, an
// index of 120 MB.
const fsckManyVersions = 6

// TestMemoryFsckManyVersions adds versions of 100,000 tensors of 512 B,
// each with other bytes (every blob new, as a training run's checkpoints
// are), and runs fsck over them under GNU time: its peak RSS stays within
// the bound of a store command on one such version (issue 13), however
// many versions the store holds. fsck peaked at 480-540 MiB on 6-7 such
// versions when it held a map of every blob record and every need of
// every manifest; it now holds 64 bytes a blob, and the index's pages
// only while bbolt checks them.
func TestMemoryFsckManyVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("6 models of 100,000 tensors (61 MB each) added into one store, then fsck (about 8 s)")
	}
	c := newCLI(t)
	for v := 1; v <= fsckManyVersions; v++ {
		model := filepath.Join(t.TempDir(), fmt.Sprint("v", v))
		if err := testmodel.WriteTensors(model, testmodel.ManySmall(100_000, 512), 0, uint64(v)); err != nil {
			t.Fatal(err)
		}
		c.ok("add", model, "--name", fmt.Sprint("v", v), "--quiet")
	}
	r, peak := c.limited("--json", "fsck")
	t.Logf("fsck of %d versions: peak RSS %d MiB", fsckManyVersions, peak>>20)
	var report struct {
		OK    bool `json:"ok"`
		Blobs int  `json:"blobs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &report); r.code != 0 || err != nil || !report.OK || report.Blobs < fsckManyVersions*100_000 {
		t.Fatalf("fsck of a clean store of %d versions: %+v (%v)\n%s", fsckManyVersions, report, err, r)
	}
	if peak > manySmallStorePeak {
		t.Errorf("fsck of %d versions: peak RSS %d MiB, want at most %d MiB", fsckManyVersions, peak>>20, manySmallStorePeak>>20)
	}
}

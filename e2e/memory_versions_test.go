package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/mstore/mstore/internal/testmodel"
)

// manyVersions is how many versions of 100,000 new blobs of 512 B
// TestMemoryManyVersions puts in one store: 600,000 blob records, an
// index of 120 MB.
const manyVersions = 6

// manyVersionsCheckoutPeak bounds the checkout of one version from that
// store: what a checkout of it from a store of one version takes (76-80
// MiB) and room for the collector's timing. With the index pages its
// look-ups read left mapped, it took 142 MiB.
const manyVersionsCheckoutPeak = 120 << 20

// TestMemoryManyVersions adds versions of 100,000 tensors of 512 B, each
// with other bytes (every blob new, as a training run's checkpoints are),
// and runs fsck, gc --dry-run, du and a checkout of the first over them
// under GNU time: their peak RSS stays within the bound of a store
// command on one such version (issue 13), however many versions the
// store holds. On 6-7 such versions fsck peaked at 480-540 MiB when it
// held a map of every blob record and every need of every manifest, gc at
// 510-560 MiB with every record in a map; fsck now holds 64 bytes a blob,
// gc the 32-byte digests the versions need, and both the index's pages
// only while they read them. A checkout of one version peaked at 145-153
// MiB while the index pages its look-ups read stayed mapped.
func TestMemoryManyVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("6 models of 100,000 tensors (61 MB each) added into one store, then fsck, gc, du and a checkout (about 10 s)")
	}
	c := newCLI(t)
	var first string
	for v := 1; v <= manyVersions; v++ {
		model := filepath.Join(t.TempDir(), fmt.Sprint("v", v))
		if v == 1 {
			first = model
		}
		if err := testmodel.WriteTensors(model, testmodel.ManySmall(100_000, 512), 0, uint64(v)); err != nil {
			t.Fatal(err)
		}
		c.ok("add", model, "--name", fmt.Sprint("v", v), "--quiet")
	}
	r, peak := c.limited("--json", "fsck")
	t.Logf("fsck of %d versions: peak RSS %d MiB", manyVersions, peak>>20)
	var report struct {
		OK    bool `json:"ok"`
		Blobs int  `json:"blobs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &report); r.code != 0 || err != nil || !report.OK || report.Blobs < manyVersions*100_000 {
		t.Fatalf("fsck of a clean store of %d versions: %+v (%v)\n%s", manyVersions, report, err, r)
	}
	if peak > manySmallStorePeak {
		t.Errorf("fsck of %d versions: peak RSS %d MiB, want at most %d MiB", manyVersions, peak>>20, manySmallStorePeak>>20)
	}
	out := filepath.Join(t.TempDir(), "out")
	for _, args := range [][]string{{"gc", "--dry-run"}, {"du"}, {"checkout", "v1", out}} {
		what := args[0]
		r, peak := c.limited(append([]string{"--json"}, args...)...)
		t.Logf("%s of %d versions: peak RSS %d MiB", what, manyVersions, peak>>20)
		if r.code != 0 {
			t.Fatalf("%s of %d versions:\n%s", what, manyVersions, r)
		}
		limit := int64(manySmallStorePeak)
		if what == "checkout" {
			limit = manyVersionsCheckoutPeak
		}
		if peak > limit {
			t.Errorf("%s of %d versions: peak RSS %d MiB, want at most %d MiB", what, manyVersions, peak>>20, limit>>20)
		}
	}
	requireSameTree(t, first, out)
}

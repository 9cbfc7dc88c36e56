package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

// The peak RSS bounds for a model of 100,000 tensors of 512 B. Checkout
// and pull are held to their targets (issue 13: 150 MB; issue 12: 200 MB
// whatever the model's size). Add meets its 150 MB target (this test:
// 118-133 MiB; an earlier build reached 155 MiB in single runs, as the
// collector's timing varies, with the test's packages run beside it), so
// its bound has room above that; it catches the class it was at before,
// 180-210 MiB (two layouts, the hashes and the blob records live together
// while the model was parsed again, the heap grown to twice that before a
// collection).
const (
	manySmallAddPeak      = 170 << 20
	manySmallCheckoutPeak = 150 << 20
	manySmallPullPeak     = 200 << 20
	// show, diff, du, fsck and gc read every manifest of the store, and
	// are held to checkout's bound (issue 13). fsck peaked at 200-230 MiB
	// when it read and hashed each packed blob with a hasher of its own.
	manySmallStorePeak = 150 << 20
	// A re-layout plans every tensor's frames before it writes (an .npz
	// member's headers, a cast's transform), and an .npz, a PyTorch
	// checkpoint or a cast is above checkout's bound, not yet within it. An npz of this model
	// peaked at 490 MiB, a cast to f16 at 275 MiB; then 300-336 and
	// 245-273 MiB; with the collector's target tightened while a
	// re-layout runs (gcpace.Tighten), 220-230 and 200-230 MiB, and a
	// PyTorch checkpoint 220-270 (300-320 before); with pieces, CRC-32
	// slots and blob records made compact, 180-190, 170-180 and 195-210.
	// A GGUF or a resharding is held to checkout's bound: 115-135 MiB
	// (145-170 before).
	manySmallConvertPeak = 250 << 20
)

// TestMemoryManySmallTensors adds a model of 100,000 tensors of 512 B (one
// 61 MB SafeTensors file), checks it out, adds a variant, runs show, diff,
// du, fsck and gc over the two, and pulls the model from `mstore serve`,
// each under GNU time: memory follows the work in flight, not the tensor
// count. Then an add killed after its first batch of blob records leaves
// a store fsck finds clean, without the version, which gc tidies and the
// same add then completes.
func TestMemoryManySmallTensors(t *testing.T) {
	if testing.Short() {
		t.Skip("a 61 MB model of 100,000 tensors, added three times, checked out and pulled (about 10 s)")
	}
	model := filepath.Join(t.TempDir(), "small")
	if err := testmodel.WriteTensors(model, testmodel.ManySmall(100_000, 512), 0, 1); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(model, "model.safetensors")
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	c := newCLI(t)
	peakWithin := func(what string, r result, peak, limit int64) {
		t.Helper()
		t.Logf("%s: peak RSS %d MiB", what, peak>>20)
		if r.code != 0 {
			t.Fatalf("%s failed:\n%s", what, r)
		}
		if peak > limit {
			t.Errorf("%s: peak RSS %d MiB, want at most %d MiB", what, peak>>20, limit>>20)
		}
	}
	sameFile := func(dir string) {
		t.Helper()
		got, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("the model read back from %s differs from what was added (%v)", dir, err)
		}
	}

	r, peak := c.limited("--json", "add", model, "--name", "m")
	peakWithin("add", r, peak, manySmallAddPeak)
	var added addResult
	if err := json.Unmarshal([]byte(r.stdout), &added); err != nil || added.Tensors != 100_000 {
		t.Fatalf("add printed %q (%v), want 100,000 tensors", r.stdout, err)
	}
	out := filepath.Join(t.TempDir(), "out")
	r, peak = c.limited("checkout", "m", out, "--quiet")
	peakWithin("checkout", r, peak, manySmallCheckoutPeak)
	sameFile(out)
	// An OCI layout streams each file as it is (its map layer too, the
	// manifest's 28 MB in base64): checkout's bound. It peaked at 217 MiB
	// when it held the manifest's bytes throughout and the map whole.
	r, peak = c.limited("checkout", "m", filepath.Join(t.TempDir(), "oci"), "--layout", "oci", "--quiet")
	peakWithin("checkout --layout oci", r, peak, manySmallCheckoutPeak)
	for _, conv := range []struct {
		args []string
		peak int64
	}{
		{[]string{"--format", "npz"}, manySmallConvertPeak},
		{[]string{"--format", "pytorch"}, manySmallConvertPeak},
		{[]string{"--dtype", "f16", "--clamp"}, manySmallConvertPeak},
		{[]string{"--format", "gguf"}, manySmallCheckoutPeak},
		{[]string{"--max-shard-size", "10MB"}, manySmallCheckoutPeak},
	} {
		args := append([]string{"checkout", "m", filepath.Join(t.TempDir(), "out"), "--quiet"}, conv.args...)
		r, peak := c.limited(args...)
		peakWithin(strings.Join(args[:1], " ")+" "+strings.Join(conv.args, " "), r, peak, conv.peak)
	}

	// A second version, one tensor changed: the store's commands that
	// read every manifest stay within checkout's bound.
	variant := filepath.Join(t.TempDir(), "variant")
	changed := bytes.Clone(want)
	changed[len(changed)-1] ^= 0xff
	if err := os.MkdirAll(variant, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(variant, "model.safetensors"), changed, 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("add", variant, "--name", "m2", "--quiet")
	// Their --json documents too: show's holds the whole manifest, diff's
	// a member per tensor (encoding/json held each whole: 204 MiB).
	for _, args := range [][]string{{"show", "m"}, {"--json", "show", "m"}, {"diff", "m", "m2"}, {"--json", "diff", "m", "m2"}, {"du"}, {"fsck"}, {"gc", "--dry-run"}} {
		r, peak := c.limited(args...)
		peakWithin(strings.Join(args, " "), r, peak, manySmallStorePeak)
	}

	srv := startServe(t, c.store, "127.0.0.1:0", nil)
	puller := newCLI(t)
	r, peak = puller.limited("pull", srv.url, "m", "--quiet")
	peakWithin("pull", r, peak, manySmallPullPeak)
	puller.requireCheckoutFile("m", sameFile)

	// More blobs than one batch (store.RecordBatch): the add records
	// them ahead of its version, and is killed after the first batch.
	// The manifest's digest (8fe4…) sorts into that batch: recorded
	// there without its manifest, fsck called its 28 MB blob corrupt.
	crashed := newCLI(t)
	run := crashed.start([]string{"MSTORE_FAILPOINT=" + store.FailAddBlobsRecorded}, "add", model, "--name", "m")
	if o := run.wait(t); o.signal != syscall.SIGKILL {
		t.Fatalf("add with failpoint %s: %s, want killed by SIGKILL\nstderr: %s", store.FailAddBlobsRecorded, o, run.stderr.String())
	}
	crashed.fsck()
	if n := crashed.readNames(); len(n.history) != 0 || len(n.tags) != 0 {
		t.Fatalf("an add killed before its commit left names: %s", n)
	}
	crashed.ok("gc", "--grace", "0")
	crashed.requireTidy()
	crashed.ok("add", model, "--name", "m", "--quiet")
	crashed.requireCheckoutFile("m", sameFile)
}

// requireCheckoutFile checks version name out into a fresh directory and
// hands it to check.
func (c *cli) requireCheckoutFile(name string, check func(dir string)) {
	c.t.Helper()
	dest := filepath.Join(c.t.TempDir(), "out")
	c.ok("checkout", name, dest, "--quiet")
	check(dest)
}

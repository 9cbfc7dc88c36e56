package e2e

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/mstore/mstore/internal/repack"
	"github.com/mstore/mstore/internal/store"
)

// weightModels writes a BF16 base and a fine-tune of it (low mantissa bits
// of a third of its elements changed): what repack codes and deltas.
func weightModels(t *testing.T, root string) ([]string, []map[string][]byte) {
	t.Helper()
	var dirs []string
	var trees []map[string][]byte
	for v := range 2 {
		var ts []tensor
		for j, n := range []int64{1 << 19, 3 << 18, 4096} {
			r := rand.New(rand.NewPCG(uint64(j), 3))
			f := rand.New(rand.NewPCG(uint64(j), 4))
			b := make([]byte, 2*n)
			for i := 0; i < len(b); i += 2 {
				binary.LittleEndian.PutUint16(b[i:], uint16(math.Float32bits(float32(r.NormFloat64()*0.02))>>16))
				if v == 1 && f.IntN(3) == 0 {
					b[i] ^= byte(1 + f.IntN(3))
				}
			}
			ts = append(ts, tensor{name: fmt.Sprintf("layers.%d.weight", j), dtype: "BF16", shape: []int64{n}, data: b})
		}
		files := map[string][]byte{"model.safetensors": safetensorsFile(ts, nil), "config.json": configJSON("bfloat16")}
		dir := filepath.Join(root, fmt.Sprintf("w%d", v))
		writeFiles(t, dir, files)
		dirs, trees = append(dirs, dir), append(trees, files)
	}
	return dirs, trees
}

type repackSummary struct {
	Plan struct {
		ToCode   int `json:"to_code"`
		WithBase int `json:"with_base"`
	} `json:"plan"`
	Result struct {
		Grouped     int     `json:"grouped"`
		Deltas      int     `json:"deltas"`
		CodedRaw    int64   `json:"coded_raw"`
		CodedStored int64   `json:"coded_stored"`
		MBPerCore   float64 `json:"mb_per_sec_per_core"`
	} `json:"result"`
}

// TestRepackFailpoints kills repack at each instant of a batch: fsck is
// clean after it, both versions check out bit for bit, the next repack
// finishes the work, and gc then leaves nothing behind.
func TestRepackFailpoints(t *testing.T) {
	t.Parallel()
	dirs, trees := weightModels(t, t.TempDir())
	for _, point := range []string{store.FailBlobTempWritten, repack.FailAfterBatch, store.FailBeforeIndexCommit, store.FailAfterIndexCommit} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			c := newRaceCLI(t)
			c.add(dirs[0], "--name", "m")
			c.add(dirs[1], "--name", "m")
			run := c.start([]string{"MSTORE_FAILPOINT=" + point}, "repack")
			if o := run.wait(t); o.signal != syscall.SIGKILL {
				t.Fatalf("repack with failpoint %s: %s, want killed\nstderr: %s", point, o, run.stderr.String())
			}
			c.fsck()
			c.requireCheckout("m~1", trees[0])
			c.requireCheckout("m", trees[1])

			var s repackSummary
			c.json(&s, "repack")
			if point != store.FailAfterIndexCommit && (s.Result.Grouped == 0 || s.Result.Deltas == 0) {
				t.Fatalf("repack after a kill before its commit: %+v, want grouped blobs and deltas", s)
			}
			var again repackSummary
			c.json(&again, "repack")
			if again.Result.Grouped+again.Result.Deltas != 0 {
				t.Fatalf("a third repack coded %+v, want nothing", again.Result)
			}
			c.requireCheckout("m~1", trees[0])
			c.requireCheckout("m", trees[1])
			c.ok("gc", "--grace", "0")
			c.requireTidy()
			c.requireCheckout("m", trees[1])
			du := c.run("--json", "du")
			if du.code != 0 {
				t.Fatalf("du: %s", du)
			}
		})
	}
}

// add --base names the delta base: an unknown one is not_found before
// anything is stored; a known one makes repack code deltas even across
// refs, and checkout gives the bytes back.
func TestAddBase(t *testing.T) {
	t.Parallel()
	dirs, trees := weightModels(t, t.TempDir())
	c := newCLI(t)
	c.add(dirs[0], "--name", "base")
	c.fail("not_found", "add", dirs[1], "--name", "ft", "--base", "nope")
	c.add(dirs[1], "--name", "ft", "--base", "base")
	var s repackSummary
	c.json(&s, "repack")
	if s.Result.Deltas == 0 || s.Result.CodedStored >= s.Result.CodedRaw {
		t.Fatalf("repack: %+v, want deltas and fewer bytes", s.Result)
	}
	c.requireCheckout("ft", trees[1])
	c.requireCheckout("base", trees[0])
	c.fsck()
}

// TestPullOfRepackedStore serves a store whose blobs repack coded (grouped
// and XOR deltas) and pulls both versions from it, and from it as a path
// remote: a coded blob travels coded (TestCodedTransfer) or, a delta
// without its base here, raw; either way the pulled checkouts are bit for
// bit.
func TestPullOfRepackedStore(t *testing.T) {
	t.Parallel()
	dirs, _ := weightModels(t, t.TempDir())
	src := newCLI(t)
	first := src.add(dirs[0], "--name", "w")
	src.add(dirs[1], "--name", "w")
	var s repackSummary
	src.json(&s, "repack")
	if s.Result.Grouped+s.Result.Deltas == 0 {
		t.Fatalf("repack coded nothing: %+v", s)
	}
	srv := startServe(t, src.store, "127.0.0.1:0", nil)
	for _, url := range []string{srv.url, src.store} {
		dst := newCLI(t)
		dst.transfer(nil, "pull", url, "w@"+first.Digest)
		dst.transfer(nil, "pull", url, "w")
		for i, ref := range []string{"w~1", "w"} {
			out := filepath.Join(t.TempDir(), "out")
			dst.ok("checkout", ref, out)
			requireSameTree(t, dirs[i], out)
		}
		if rep := dst.fsck(); !rep.OK {
			t.Fatalf("fsck after a pull from %s: %+v", url, rep)
		}
	}
}

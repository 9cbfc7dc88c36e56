package e2e

import (
	"path/filepath"
	"testing"
)

// codingCounts is how many blobs a store keeps in each coding (du --json).
func (c *cli) codingCounts() map[string]int {
	c.t.Helper()
	var du struct {
		Codings map[string]struct {
			Blobs int `json:"blobs"`
		} `json:"codings"`
	}
	c.json(&du, "du")
	out := map[string]int{}
	for k, v := range du.Codings {
		out[k] = v.Blobs
	}
	return out
}

// TestCodedTransfer: blobs a repack coded (byte-grouped, XOR deltas) cross
// to and from `mstore serve` coded, fewer bytes on the wire than raw, are
// checked after decoding and kept coded at the other end; a delta whose
// base the receiver lacks falls back to raw; every checkout is bit for bit.
func TestCodedTransfer(t *testing.T) {
	t.Parallel()
	dirs, _ := weightModels(t, t.TempDir())
	src := newCLI(t)
	first := src.add(dirs[0], "--name", "w")
	src.add(dirs[1], "--name", "w")
	var rp repackSummary
	src.json(&rp, "repack")
	src.ok("gc", "--grace", "0")
	want := src.codingCounts()
	if want["grouped"] == 0 || want["delta"] == 0 {
		t.Fatalf("repack made no grouped or no delta blobs: %v", want)
	}
	// A store that pulls or takes a push writes the two manifests' blob
	// copies raw (the source's repack coded them): the tensors' blobs are
	// kept as the source keeps them.
	sameCodings := func(what string, got map[string]int) {
		t.Helper()
		if got["delta"] != want["delta"] || got["grouped"] < want["grouped"]-2 ||
			got["grouped"]+got["raw"] != want["grouped"]+want["raw"] {
			t.Fatalf("%s keeps %v, the source %v", what, got, want)
		}
	}
	check := func(c *cli, what string, res transferResult) {
		t.Helper()
		if res.BytesMoved == 0 || res.WireBytes >= res.BytesMoved {
			t.Fatalf("%s: %d bytes on the wire for %d bytes of blobs: nothing moved coded", what, res.WireBytes, res.BytesMoved)
		}
	}
	requireVersions := func(c *cli) {
		t.Helper()
		for i, ref := range []string{"w~1", "w"} {
			out := filepath.Join(t.TempDir(), "out")
			c.ok("checkout", ref, out)
			requireSameTree(t, dirs[i], out)
		}
		c.fsck()
	}

	srv := startServe(t, src.store, "127.0.0.1:0", nil)
	dst := newCLI(t)
	check(dst, "pull of the first version", dst.transfer(nil, "pull", srv.url, "w@"+first.Digest))
	check(dst, "pull of the fine-tune, its bases local", dst.transfer(nil, "pull", srv.url, "w"))
	sameCodings("the pulled store", dst.codingCounts())
	requireVersions(dst)

	// The fine-tune alone: its deltas' bases are not here, so they come raw.
	alone := newCLI(t)
	alone.transfer(nil, "pull", srv.url, "w")
	if got := alone.codingCounts(); got["delta"] != 0 {
		t.Fatalf("a delta was stored without its base: %v", got)
	}
	out := filepath.Join(t.TempDir(), "out")
	alone.ok("checkout", "w", out)
	requireSameTree(t, dirs[1], out)
	alone.fsck()

	// Push: the first version, then the fine-tune against the bases the
	// server now has.
	up := pushServer(t)
	env := []string{"MSTORE_TOKEN=" + testToken}
	src.ok("tag", "w:v1", "w~1")
	check(src, "push of the first version", src.transfer(env, "push", up.url, "w:v1"))
	check(src, "push of the fine-tune", src.transfer(env, "push", up.url, "w"))
	served := &cli{t: t, store: up.store}
	sameCodings("the pushed-to store", served.codingCounts())
	back := newCLI(t)
	back.transfer(nil, "pull", up.url, "w:v1")
	back.transfer(nil, "pull", up.url, "w")
	requireVersions(back)
	served.fsck()
}

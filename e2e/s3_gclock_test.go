package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mstore/mstore/internal/store"
)

// TestRemoteGCPushRace: the race a grace period alone leaves open, made
// deterministic. An interrupted push leaves blobs older than --grace 0 in
// the bucket; the next push of that version finds them present and skips
// them. In both orders of events gc deletes none of them while the push
// can still name them, and the version pulled afterwards is complete:
//   - the push is stopped between HasBlobs and its manifest, or between
//     its manifest and its ref: gc --grace 0 (which a dry run shows would
//     delete those very blobs) refuses, conflict, and deletes nothing; the
//     push then completes (without the locks gc deletes the blobs, a pack,
//     the manifest, and the push fails not_found);
//   - gc holds its lock (stopped before marking): the push refuses,
//     conflict, naming gc; after the gc it is pushed again and completes.
//
// The killed pushes' locks are stale (their processes are gone): gc
// ignores and reports them, and --remove-stale-locks deletes them.
func TestRemoteGCPushRace(t *testing.T) {
	t.Parallel()
	k, gw := s3RemoteKind(t)
	bucket := k.fresh(t)
	env := gw.Env()
	fx := newRemoteFixture(t)
	a := newCLI(t)
	a.add(fx.base, "--name", "llm")
	pulled := func(name, want string) {
		t.Helper()
		b := newCLI(t)
		b.transfer(env, "pull", bucket, name)
		out := filepath.Join(t.TempDir(), "out")
		b.ok("checkout", name, out)
		requireSameTree(t, want, out)
	}

	// What gc could delete: the bucket's blobs, packs and manifests.
	objectFiles := func() (out []string) {
		root := filepath.Join(gw.Dir, strings.TrimPrefix(bucket, "s3://"))
		for _, sub := range []string{"blobs", "packs", "manifests"} {
			out = append(out, listFiles(t, filepath.Join(root, sub))...)
		}
		return out
	}
	// Order 1: the push found the left blobs present and is stopped,
	// before its manifest, then before its ref moves.
	models := map[string]string{store.FailPushBlobsChecked: fx.base,
		store.FailPushManifestPut: filepath.Dir(writeFile(t, filepath.Join(t.TempDir(), "m2", "m.safetensors"), safetensorsFile(smallModel(91), nil)))}
	for i, stop := range []string{store.FailPushBlobsChecked, store.FailPushManifestPut} {
		name := []string{"llm", "m2"}[i]
		if name != "llm" {
			a.add(models[stop], "--name", name)
		}
		a.interruptPush(env, bucket, name)
		p := a.start(append(env, "MSTORE_FAILPOINT="+stop+":stop"), "--json", "push", bucket, name)
		p.waitStopped(t)
		dry := a.remoteGC(env, "--remote", bucket, "--grace", "0s", "--dry-run")
		if len(dry.Plan.Delete) == 0 && stop == store.FailPushBlobsChecked {
			t.Fatalf("dry run: %+v; want the interrupted push's blobs planned (the race this test closes)", dry)
		}
		var fresh, stale int
		for _, l := range dry.Locks {
			if l.Kind != "push" {
				t.Errorf("lock %s of kind %q, want push", l.Key, l.Kind)
			}
			if l.Stale {
				stale++
			} else {
				fresh++
			}
		}
		if fresh != 1 || stale != i+1 {
			t.Errorf("stopped at %s: dry run locks %+v: want the stopped push's (held) and the killed pushes' (stale)", stop, dry.Locks)
		}
		before := objectFiles()
		// Not failEnv: should gc run, the test goes on to show what is lost.
		if r := execMstore(t, env, "--store", a.store, "gc", "--remote", bucket, "--grace", "0s"); r.code != exitCodes["conflict"] || !strings.Contains(r.stderr, "a push into") {
			t.Errorf("gc beside a push stopped at %s: want a conflict saying a push is running\n%s", stop, r)
		}
		if after := objectFiles(); !equalStrings(before, after) {
			t.Errorf("a refused gc changed the bucket: %v", diffStrings(before, after))
		}
		p.cmd.Process.Signal(syscall.SIGCONT)
		if out := p.wait(t); out.code != 0 {
			t.Fatalf("push stopped at %s, after the refused gc: %s\n%s", stop, out, p.stderr.String())
		}
		res := a.remoteGC(env, "--remote", bucket, "--grace", "0s")
		if res.Result == nil || len(res.Locks) != i+1 || !res.Locks[0].Stale || res.Locks[0].Removed {
			t.Fatalf("gc after the push: %+v; want it run, the killed pushes' locks reported stale and kept", res)
		}
		pulled(name, models[stop])
	}

	// Order 2: gc holds its lock first.
	a.add(fx.tuned, "--name", "ft")
	a.interruptPush(env, bucket, "ft")
	gc := a.start(append(env, "MSTORE_FAILPOINT="+store.FailRemoteGCLocked+":stop"), "--json", "gc", "--remote", bucket, "--grace", "0s")
	gc.waitStopped(t)
	if msg := a.failEnv(env, "conflict", "push", bucket, "ft"); !strings.Contains(msg, "gc --remote is collecting") {
		t.Errorf("push beside a gc: %q does not say gc is running", msg)
	}
	gc.cmd.Process.Signal(syscall.SIGCONT)
	if out := gc.wait(t); out.code != 0 {
		t.Fatalf("gc after the refused push: %s\n%s", out, gc.stderr.String())
	}
	a.transfer(env, "push", bucket, "ft") // sends anew what gc deleted
	pulled("ft", fx.tuned)
	pulled("llm", fx.base)
	pulled("m2", models[store.FailPushManifestPut])

	// The three killed pushes' locks go with --remove-stale-locks.
	res := a.remoteGC(env, "--remote", bucket, "--grace", "0s", "--remove-stale-locks")
	if len(res.Locks) != 3 || !res.Locks[0].Removed || !res.Locks[1].Removed || !res.Locks[2].Removed {
		t.Fatalf("gc --remove-stale-locks: %+v; want the three stale locks removed", res.Locks)
	}
	if dry := a.remoteGC(env, "--remote", bucket, "--dry-run"); len(dry.Locks) != 0 {
		t.Fatalf("locks left after --remove-stale-locks: %+v", dry.Locks)
	}
}

// TestRemoteGCPushThroughServe: a push through serve --remote s3:// holds
// the bucket's push lock too (the server takes it for the client), in
// both orders: gc refuses beside a push stopped after HasBlobs, and a push
// through the server refuses while gc holds its lock. The version pulled
// afterwards is complete, and the server leaves no lock behind.
func TestRemoteGCPushThroughServe(t *testing.T) {
	t.Parallel()
	k, gw := s3RemoteKind(t)
	bucket := k.fresh(t)
	env := gw.Env()
	tok := tokenFile(t)
	srv := startServe(t, filepath.Join(t.TempDir(), "unused"), "127.0.0.1:0", env, "--remote", bucket, "--allow-push", "--token-file", tok)
	push := []string{"MSTORE_TOKEN=" + testToken}
	fx := newRemoteFixture(t)
	a := newCLI(t)
	a.add(fx.base, "--name", "llm")
	a.interruptPush(env, bucket, "llm")

	p := a.start(append(push, "MSTORE_FAILPOINT="+store.FailPushBlobsChecked+":stop"), "push", srv.url, "llm")
	p.waitStopped(t)
	if r := execMstore(t, env, "--store", a.store, "gc", "--remote", bucket, "--grace", "0s"); r.code != exitCodes["conflict"] || !strings.Contains(r.stderr, "a push into") {
		t.Errorf("gc beside a push through serve: want a conflict saying a push is running\n%s", r)
	}
	p.cmd.Process.Signal(syscall.SIGCONT)
	if out := p.wait(t); out.code != 0 {
		t.Fatalf("push through serve after the refused gc: %s\n%s", out, p.stderr.String())
	}

	a.add(fx.tuned, "--name", "llm")
	gc := a.start(append(env, "MSTORE_FAILPOINT="+store.FailRemoteGCLocked+":stop"), "gc", "--remote", bucket, "--grace", "0s")
	gc.waitStopped(t)
	if msg := a.failEnv(push, "conflict", "push", srv.url, "llm"); !strings.Contains(msg, "gc --remote is collecting") {
		t.Errorf("push through serve beside a gc: %q does not say gc is running", msg)
	}
	gc.cmd.Process.Signal(syscall.SIGCONT)
	if out := gc.wait(t); out.code != 0 {
		t.Fatalf("gc after the refused push: %s\n%s", out, gc.stderr.String())
	}
	a.transfer(push, "push", srv.url, "llm")
	b := newCLI(t)
	b.transfer(env, "pull", bucket, "llm")
	out := filepath.Join(t.TempDir(), "out")
	b.ok("checkout", "llm", out)
	requireSameTree(t, fx.tuned, out)
	if dry := a.remoteGC(env, "--remote", bucket, "--dry-run"); len(dry.Locks) != 1 || !dry.Locks[0].Stale {
		t.Fatalf("locks after the pushes through serve: %+v; want only the killed push's, stale", dry.Locks)
	}
}

// interruptPush kills a push of name to bucket after its first batch of
// blobs: they stay in the bucket, named by no manifest.
func (c *cli) interruptPush(env []string, bucket, name string) {
	c.t.Helper()
	killed := c.start(append(env, "MSTORE_FAILPOINT="+store.FailPushBlobsSent), "push", bucket, name, "--jobs", "1")
	if out := killed.wait(c.t); out.signal == 0 {
		c.t.Fatalf("push did not die at its failpoint: %s", out)
	}
}

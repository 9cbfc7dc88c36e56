package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/remote/s3remote/s3test"
)

// s3RemoteKind gives each test a new bucket of one versitygw.
func s3RemoteKind(t *testing.T) (remoteKind, *s3test.Server) {
	gw := s3test.Start(t)
	var n atomic.Int32
	return remoteKind{name: "s3", env: gw.Env(), fresh: func(t *testing.T) string {
		return "s3://" + gw.Bucket(t, fmt.Sprintf("bucket%d", n.Add(1))) + "/team/models"
	}}, gw
}

func TestRemoteS3(t *testing.T) {
	t.Parallel()
	k, _ := s3RemoteKind(t)
	runRemoteScenarios(t, k)
}

// TestServeOverBucket: two stateless servers over one bucket are one
// remote: what is pushed through one is pulled through the other, and of
// two racing pushes of one ref, one through each, exactly one wins.
func TestServeOverBucket(t *testing.T) {
	t.Parallel()
	k, gw := s3RemoteKind(t)
	bucket := k.fresh(t)
	tok := tokenFile(t)
	s1 := startServe(t, filepath.Join(t.TempDir(), "unused1"), "127.0.0.1:0", gw.Env(), "--remote", bucket, "--allow-push", "--token-file", tok)
	s2 := startServe(t, filepath.Join(t.TempDir(), "unused2"), "127.0.0.1:0", gw.Env(), "--remote", bucket, "--allow-push", "--token-file", tok)
	fx := newRemoteFixture(t)
	env := []string{"MSTORE_TOKEN=" + testToken}

	a, b := newCLI(t), newCLI(t)
	base := a.add(fx.base, "--name", "llm").Digest
	a.transfer(env, "push", s1.url, "llm")
	got := b.transfer(nil, "pull", s2.url, "llm")
	if got.Digest != base {
		t.Fatalf("pulled %s through the second server, pushed %s through the first", got.Digest, base)
	}
	// Direct from the bucket too, its endpoint given as a flag.
	c := newCLI(t)
	var creds []string
	for _, kv := range gw.Env() {
		if !strings.HasPrefix(kv, "AWS_ENDPOINT_URL=") {
			creds = append(creds, kv)
		}
	}
	if got := c.transfer(creds, "pull", bucket, "llm", "--endpoint-url", gw.Endpoint); got.Digest != base || got.BytesMoved == 0 {
		t.Fatalf("pull from the bucket: %+v", got)
	}
	out := filepath.Join(t.TempDir(), "out")
	c.ok("checkout", "llm", out)
	requireSameTree(t, fx.base, out)

	// Both move llm on from base, racing, one through each server.
	a.add(fx.tuned, "--name", "llm")
	b.add(writeFile(t, filepath.Join(t.TempDir(), "m.safetensors"), safetensorsFile(smallModel(77), nil)), "--name", "llm")
	pa := a.start(env, "push", s1.url, "llm")
	pb := b.start(env, "push", s2.url, "llm")
	oa, ob := pa.wait(t), pb.wait(t)
	if (oa.code == 0) == (ob.code == 0) || (oa.code != 0 && oa.code != exitCodes["conflict"]) || (ob.code != 0 && ob.code != exitCodes["conflict"]) {
		t.Fatalf("racing pushes through two servers: %s and %s, want one success and one conflict\n%s\n%s", oa, ob, pa.stderr.String(), pb.stderr.String())
	}
}

// TestServeRestartedDuringPush: a stateless server over a bucket killed in
// the middle of a push and started again on the same address; the push
// retries through the gap and completes.
func TestServeRestartedDuringPush(t *testing.T) {
	t.Parallel()
	k, gw := s3RemoteKind(t)
	bucket := k.fresh(t)
	tok := tokenFile(t)
	args := []string{"--remote", bucket, "--allow-push", "--token-file", tok}
	s1 := startServe(t, filepath.Join(t.TempDir(), "unused"), "127.0.0.1:0", gw.Env(), args...)
	fx := newRemoteFixture(t)
	a := newCLI(t)
	a.add(fx.base, "--name", "llm")
	p := a.start([]string{"MSTORE_TOKEN=" + testToken, "MSTORE_FAILPOINT=push-blobs-sent:stop"},
		"--json", "push", s1.url, "llm", "--jobs", "1", "--timeout", "20s")
	p.waitStopped(t)
	s1.stop()
	p.cmd.Process.Signal(syscall.SIGCONT)
	time.Sleep(500 * time.Millisecond) // the push retries against nothing
	startServe(t, filepath.Join(t.TempDir(), "unused2"), s1.addr(), gw.Env(), args...)
	if out := p.wait(t); out.code != 0 {
		t.Fatalf("push across a server restart: %s\n%s", out, p.stderr.String())
	}
	b := newCLI(t)
	b.transfer(gw.Env(), "pull", bucket, "llm")
	dir := filepath.Join(t.TempDir(), "out")
	b.ok("checkout", "llm", dir)
	requireSameTree(t, fx.base, dir)
}

type remoteGCResult struct {
	DryRun bool `json:"dry_run"`
	Locks  []struct {
		Key     string `json:"key"`
		Kind    string `json:"kind"`
		Stale   bool   `json:"stale"`
		Removed bool   `json:"removed"`
	} `json:"locks"`
	Plan struct {
		Delete    []struct{ Key string } `json:"delete"`
		KeptYoung []struct{ Key string } `json:"kept_young"`
	} `json:"plan"`
	Result *struct {
		Deleted int `json:"deleted"`
	} `json:"result"`
}

func (c *cli) remoteGC(env []string, args ...string) remoteGCResult {
	c.t.Helper()
	r := execMstore(c.t, env, append([]string{"--store", c.store, "--json", "gc"}, args...)...)
	if r.code != 0 {
		c.t.Fatalf("gc --remote failed:\n%s", r)
	}
	var res remoteGCResult
	decodeStrict(c.t, r, &res)
	return res
}

// TestRemoteGC: gc of a bucket refuses to delete while a push holds its
// lock (a dry run plans, keeping what the push has sent as younger than
// --grace), keeps every version a ref or tag names, and deletes what an
// interrupted push left once the grace period is waived.
func TestRemoteGC(t *testing.T) {
	t.Parallel()
	k, gw := s3RemoteKind(t)
	bucket := k.fresh(t)
	env := gw.Env()
	fx := newRemoteFixture(t)
	a := newCLI(t)
	a.add(fx.base, "--name", "llm", "--tag", "v1")
	a.transfer(env, "push", bucket, "llm")
	a.transfer(env, "push", bucket, "llm:v1")
	a.add(fx.tuned, "--name", "llm-ft")

	p := a.start(append(env, "MSTORE_FAILPOINT=push-blobs-sent:stop"), "push", bucket, "llm-ft", "--jobs", "1")
	p.waitStopped(t)
	a.failEnv(env, "conflict", "gc", "--remote", bucket)
	res := a.remoteGC(env, "--remote", bucket, "--dry-run")
	if len(res.Plan.Delete) != 0 || len(res.Plan.KeptYoung) == 0 {
		t.Fatalf("dry run during a push: %+v; want nothing to delete and the push's blobs kept as young", res)
	}
	p.cmd.Process.Signal(syscall.SIGCONT)
	if out := p.wait(t); out.code != 0 {
		t.Fatalf("push after a gc ran beside it: %s\n%s", out, p.stderr.String())
	}

	// A push killed midway leaves blobs no manifest names.
	a.add(writeFile(t, filepath.Join(t.TempDir(), "m.safetensors"), safetensorsFile(smallModel(88), nil)), "--name", "lost")
	a.add(writeFile(t, filepath.Join(t.TempDir(), "big", "m.safetensors"), safetensorsFile([]tensor{randTensor("w", "F32", 5, 1024, 1280)}, nil)), "--name", "lost")
	killed := a.start(append(env, "MSTORE_FAILPOINT=push-blobs-sent"), "push", bucket, "lost", "--jobs", "1")
	if out := killed.wait(t); out.signal == 0 {
		t.Fatalf("push did not die at its failpoint: %s", out)
	}
	dry := a.remoteGC(env, "--remote", bucket, "--grace", "0s", "--dry-run")
	if !dry.DryRun || dry.Result != nil || len(dry.Plan.Delete) == 0 {
		t.Fatalf("dry run: %+v; want the killed push's blobs planned", dry)
	}
	res = a.remoteGC(env, "--remote", bucket, "--grace", "0s")
	if res.Result == nil || res.Result.Deleted != len(dry.Plan.Delete) {
		t.Fatalf("gc: %+v; want the %d objects of the dry run deleted", res, len(dry.Plan.Delete))
	}
	if again := a.remoteGC(env, "--remote", bucket, "--grace", "0s", "--dry-run"); len(again.Plan.Delete) != 0 {
		t.Fatalf("a second gc still finds %d objects to delete", len(again.Plan.Delete))
	}
	for name, want := range map[string]string{"llm": fx.base, "llm:v1": fx.base, "llm-ft": fx.tuned} {
		b := newCLI(t)
		b.transfer(env, "pull", bucket, name)
		out := filepath.Join(t.TempDir(), "out")
		b.ok("checkout", name, out)
		requireSameTree(t, want, out)
	}
}

// TestS3Unauthorized: a pull or push whose credentials the object store
// refuses (a wrong secret, an unknown access key) fails as unauthorized
// (exit 20), and the bucket keeps what it had.
func TestS3Unauthorized(t *testing.T) {
	t.Parallel()
	k, gw := s3RemoteKind(t)
	bucket := k.fresh(t)
	fx := newRemoteFixture(t)
	a := newCLI(t)
	a.add(fx.base, "--name", "llm")
	a.transfer(gw.Env(), "push", bucket, "llm")
	a.ok("tag", "llm:v9", "llm")
	with := func(access, secret string) []string {
		return append(gw.Env(), "AWS_ACCESS_KEY_ID="+access, "AWS_SECRET_ACCESS_KEY="+secret)
	}
	b := newCLI(t)
	b.ok("init")
	for _, env := range [][]string{with(gw.AccessKey, gw.SecretKey+"x"), with("nobody", gw.SecretKey)} {
		b.failEnv(env, "unauthorized", "pull", bucket, "llm")
		a.failEnv(env, "unauthorized", "push", bucket, "llm:v9")
	}
	b.transfer(gw.Env(), "pull", bucket, "llm")
	b.failEnv(gw.Env(), "not_found", "pull", bucket, "llm:v9")
}

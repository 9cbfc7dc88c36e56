package e2e

import (
	"fmt"
	"path/filepath"
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
	// Direct from the bucket too.
	c := newCLI(t)
	if got := c.transfer(gw.Env(), "pull", bucket, "llm"); got.Digest != base || got.BytesMoved == 0 {
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

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// transferResult is `pull --json` and `push --json`.
type transferResult struct {
	Name         string  `json:"name"`
	Tag          string  `json:"tag"`
	Digest       string  `json:"digest"`
	Remote       string  `json:"remote"`
	BlobsMoved   int     `json:"blobs_moved"`
	BytesMoved   int64   `json:"bytes_moved"`
	BlobsPresent int     `json:"blobs_present"`
	WireBytes    int64   `json:"wire_bytes"`
	RefMoved     bool    `json:"ref_moved"`
	TagCreated   bool    `json:"tag_created"`
	Seconds      float64 `json:"seconds"`
}

func (c *cli) transfer(env []string, args ...string) transferResult {
	c.t.Helper()
	r := execMstore(c.t, env, append([]string{"--store", c.store, "--json"}, args...)...)
	if r.code != 0 {
		c.t.Fatalf("command failed:\n%s", r)
	}
	var res transferResult
	decodeStrict(c.t, r, &res)
	if !isDigest(res.Digest) {
		c.t.Fatalf("digest %q in %s", res.Digest, r)
	}
	return res
}

// remoteFixture is a base model and a fine-tune of it that changes one
// tensor, written as model directories.
type remoteFixture struct {
	base, tuned string
}

func newRemoteFixture(t *testing.T) remoteFixture {
	t.Helper()
	dir := t.TempDir()
	ts := smallModel(40)
	ts = append(ts, randTensor("lm_head.weight", "F32", 41, 1024, 1536)) // 6 MiB: two chunks
	base := shardedModel(ts, 2)
	tunedTs := append([]tensor{}, ts...)
	tunedTs[1] = randTensor(ts[1].name, ts[1].dtype, 99, ts[1].shape...)
	tuned := shardedModel(tunedTs, 2)
	f := remoteFixture{base: filepath.Join(dir, "base"), tuned: filepath.Join(dir, "tuned")}
	writeFiles(t, f.base, base)
	writeFiles(t, f.tuned, tuned)
	return f
}

// remoteKind is a way to get a fresh remote for a test: its URL and the
// environment (token) a client needs.
type remoteKind struct {
	name string
	// fresh returns a new empty remote's URL.
	fresh func(t *testing.T) string
	env   []string
}

func pathRemoteKind() remoteKind {
	return remoteKind{name: "path", fresh: func(t *testing.T) string { return filepath.Join(t.TempDir(), "remote.mstore") }}
}

// runRemoteScenarios runs the push/pull scenarios against one kind.
func runRemoteScenarios(t *testing.T, k remoteKind) {
	fx := newRemoteFixture(t)

	t.Run("push, pull, pull again, checkout", func(t *testing.T) {
		t.Parallel()
		url := k.fresh(t)
		a, b := newCLI(t), newCLI(t)
		added := a.add(fx.base, "--name", "acme/llm")
		pushed := a.transfer(k.env, "push", url, "acme/llm")
		if pushed.Digest != added.Digest || pushed.BlobsMoved == 0 || pushed.BlobsPresent != 0 || !pushed.RefMoved {
			t.Fatalf("first push: %+v", pushed)
		}
		again := a.transfer(k.env, "push", url, "acme/llm")
		if again.BlobsMoved != 0 || again.BytesMoved != 0 || again.RefMoved || again.BlobsPresent != pushed.BlobsMoved {
			t.Fatalf("second push moved something: %+v (first %+v)", again, pushed)
		}
		pulled := b.transfer(k.env, "pull", url, "acme/llm")
		if pulled.Digest != added.Digest || pulled.BlobsMoved != pushed.BlobsMoved || pulled.BytesMoved != pushed.BytesMoved || pulled.BlobsPresent != 0 {
			t.Fatalf("pull into an empty store: %+v, push was %+v", pulled, pushed)
		}
		if pulled.BytesMoved != added.NewBytes {
			t.Errorf("pull moved %d bytes, add stored %d", pulled.BytesMoved, added.NewBytes)
		}
		re := b.transfer(k.env, "pull", url, "acme/llm")
		if re.BlobsMoved != 0 || re.BytesMoved != 0 || re.BlobsPresent != pulled.BlobsMoved || re.RefMoved {
			t.Fatalf("pull again moved something: %+v", re)
		}
		out := filepath.Join(t.TempDir(), "out")
		b.ok("checkout", "acme/llm", out)
		requireSameTree(t, fx.base, out)
		if rep := b.fsck(); !rep.OK {
			t.Fatalf("fsck after pull: %+v", rep)
		}
	})

	t.Run("a fine-tune after its base moves only its new chunks", func(t *testing.T) {
		t.Parallel()
		url := k.fresh(t)
		a, b := newCLI(t), newCLI(t)
		a.add(fx.base, "--name", "llm")
		a.transfer(k.env, "push", url, "llm")
		b.transfer(k.env, "pull", url, "llm")
		tuned := a.add(fx.tuned, "--name", "llm-ft")
		pushed := a.transfer(k.env, "push", url, "llm-ft")
		if pushed.BytesMoved != tuned.NewBytes {
			t.Errorf("push of the fine-tune moved %d bytes, add stored %d new", pushed.BytesMoved, tuned.NewBytes)
		}
		pulled := b.transfer(k.env, "pull", url, "llm-ft")
		if pulled.BytesMoved != tuned.NewBytes || pulled.BlobsMoved != tuned.NewBlobs || pulled.BlobsPresent == 0 {
			t.Errorf("pull of the fine-tune: %+v; add stored %d new blobs, %d bytes", pulled, tuned.NewBlobs, tuned.NewBytes)
		}
		out := filepath.Join(t.TempDir(), "out")
		b.ok("checkout", "llm-ft", out)
		requireSameTree(t, fx.tuned, out)
	})

	t.Run("pinned pull", func(t *testing.T) {
		t.Parallel()
		url := k.fresh(t)
		a, b := newCLI(t), newCLI(t)
		v1 := a.add(fx.base, "--name", "llm").Digest
		a.transfer(k.env, "push", url, "llm")
		v2 := a.add(fx.tuned, "--name", "llm").Digest
		a.transfer(k.env, "push", url, "llm")
		onlyOther := a.add(writeFile(t, filepath.Join(t.TempDir(), "m.safetensors"), safetensorsFile(smallModel(42), nil)), "--name", "shard").Digest
		a.transfer(k.env, "push", url, "shard")

		b.ok("init")
		before := b.snapshot()
		msg := b.failEnv(k.env, "not_found", "pull", url, "llm@"+onlyOther)
		if !strings.Contains(msg, "history") {
			t.Errorf("refusal does not say why: %s", msg)
		}
		b.failEnv(k.env, "not_found", "pull", url, "llm@"+strings.Repeat("0", 64))
		b.requireUnchanged(before)

		got := b.transfer(k.env, "pull", url, "llm@"+v1[:12])
		if got.Digest != v1 {
			t.Fatalf("pinned pull of v1 got %s", got.Digest)
		}
		if d := b.show("llm@" + v1).Digest; d != v1 {
			t.Fatalf("local llm@v1 is %s", d)
		}
		got = b.transfer(k.env, "pull", url, "llm")
		if got.Digest != v2 {
			t.Fatalf("pull of llm got %s, want %s", got.Digest, v2)
		}
	})

	t.Run("tags", func(t *testing.T) {
		t.Parallel()
		url := k.fresh(t)
		a, b := newCLI(t), newCLI(t)
		v1 := a.add(fx.base, "--name", "llm", "--tag", "v1").Digest
		res := a.transfer(k.env, "push", url, "llm:v1")
		if !res.TagCreated || res.RefMoved {
			t.Fatalf("push of a tag: %+v", res)
		}
		if res := a.transfer(k.env, "push", url, "llm:v1"); res.TagCreated || res.BlobsMoved != 0 {
			t.Fatalf("push of the tag again: %+v", res)
		}
		// Another store's llm:v1 at another digest is a conflict on push.
		c := newCLI(t)
		c.add(fx.tuned, "--name", "llm", "--tag", "v1")
		c.failEnv(k.env, "conflict", "push", url, "llm:v1")
		if res := c.transfer(k.env, "push", url, "llm"); res.BlobsPresent == 0 || res.BlobsMoved == 0 {
			// The refused tag push sent nothing: the blobs only c has move now.
			t.Fatalf("push after a refused tag push: %+v", res)
		}

		got := b.transfer(k.env, "pull", url, "llm:v1", "--as", "mine")
		if got.Digest != v1 || !got.TagCreated || got.Name != "mine" {
			t.Fatalf("pull of a tag: %+v", got)
		}
		if d := b.show("mine:v1").Digest; d != v1 {
			t.Fatalf("local mine:v1 is %s", d)
		}
		// A local tag at another digest is never overwritten.
		d := newCLI(t)
		d.add(fx.tuned, "--name", "llm", "--tag", "v1")
		before := d.snapshot()
		d.failEnv(k.env, "conflict", "pull", url, "llm:v1")
		d.requireUnchanged(before)
	})

	t.Run("push of a moved ref is a conflict", func(t *testing.T) {
		t.Parallel()
		url := k.fresh(t)
		a, b := newCLI(t), newCLI(t)
		a.add(fx.base, "--name", "llm")
		a.transfer(k.env, "push", url, "llm")
		b.add(fx.tuned, "--name", "llm")
		msg := b.failEnv(k.env, "conflict", "push", url, "llm")
		if !strings.Contains(msg, "pull") {
			t.Errorf("conflict does not say how to proceed: %s", msg)
		}
		// Once b has pulled the remote's version and moved on from it, b can push.
		b.transfer(k.env, "pull", url, "llm")
		tuned := b.add(fx.tuned, "--name", "llm").Digest
		if res := b.transfer(k.env, "push", url, "llm"); res.Digest != tuned || !res.RefMoved {
			t.Fatalf("push after pull: %+v", res)
		}
	})
}

// failEnv runs a command with extra environment variables that must fail
// with class (checked with --json: exit code, class, empty stdout) and
// returns its message.
func (c *cli) failEnv(env []string, class string, args ...string) string {
	c.t.Helper()
	r := execMstore(c.t, env, append([]string{"--store", c.store, "--json"}, args...)...)
	if r.code != exitCodes[class] || r.stdout != "" {
		c.t.Fatalf("want a %s failure (exit %d):\n%s", class, exitCodes[class], r)
	}
	var e struct {
		Error struct{ Class, Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stderr), &e); err != nil || e.Error.Class != class || strings.Contains(e.Error.Message, class+": ") {
		c.t.Fatalf("stderr is not a %s JSON error (with a message that does not repeat the class): %v\n%s", class, err, r)
	}
	return e.Error.Message
}

func TestRemotePath(t *testing.T) {
	t.Parallel()
	runRemoteScenarios(t, pathRemoteKind())
}

// TestRemoteNames: remote add|ls|rm, kept in the store, and push and pull
// by name.
func TestRemoteNames(t *testing.T) {
	t.Parallel()
	fx := newRemoteFixture(t)
	a := newCLI(t)
	a.add(fx.base, "--name", "llm")
	dir := filepath.Join(t.TempDir(), "team.mstore")
	a.ok("remote", "add", "team", dir)
	a.ok("remote", "add", "web", "https://models.example.com:8443")
	var ls struct {
		Remotes []struct{ Name, URL string } `json:"remotes"`
	}
	a.json(&ls, "remote", "ls")
	if len(ls.Remotes) != 2 || ls.Remotes[0].Name != "team" || ls.Remotes[0].URL != dir || ls.Remotes[1].Name != "web" {
		t.Fatalf("remote ls: %+v", ls)
	}
	a.fail("conflict", "remote", "add", "team", "/elsewhere")
	a.fail("schema_error", "remote", "add", "bad/name", dir)
	a.fail("schema_error", "remote", "add", "ftp", "ftp://host/x")
	pushed := a.transfer(nil, "push", "team", "llm")
	if pushed.Remote != "team" || pushed.BlobsMoved == 0 {
		t.Fatalf("push by name: %+v", pushed)
	}
	b := newCLI(t)
	b.ok("remote", "add", "team", dir)
	if got := b.transfer(nil, "pull", "team", "llm"); got.Digest != pushed.Digest {
		t.Fatalf("pull by name: %+v", got)
	}
	if log := b.ok("log", "llm"); !strings.Contains(log, "pull team llm") {
		t.Errorf("the history entry does not say where the version came from:\n%s", log)
	}
	a.ok("remote", "rm", "team")
	a.fail("not_found", "remote", "rm", "team")
	a.json(&ls, "remote", "ls")
	if len(ls.Remotes) != 1 || ls.Remotes[0].Name != "web" {
		t.Fatalf("remote ls after rm: %+v", ls)
	}
	if _, err := os.Stat(filepath.Join(dir, "index.db")); err != nil {
		t.Fatalf("remote rm touched the remote: %v", err)
	}
}

// TestPullRefusals: version names pull does not take, and a server that
// is not there, change nothing and say why.
func TestPullRefusals(t *testing.T) {
	t.Parallel()
	a := newCLI(t)
	a.ok("init")
	before := a.snapshot()
	dir := filepath.Join(t.TempDir(), "remote")
	if r := execMstore(t, nil, "--store", dir, "init"); r.code != 0 {
		t.Fatal(r)
	}
	a.fail("schema_error", "pull", dir, strings.Repeat("ab", 32))
	a.fail("schema_error", "pull", dir, "llm~1")
	a.fail("schema_error", "pull", dir, "llm", "--as", "../x")
	a.fail("not_found", "pull", dir, "llm")
	a.fail("not_found", "pull", filepath.Join(t.TempDir(), "nothing-here"), "llm")
	a.fail("schema_error", "pull", "ftp://host/x", "llm")
	r := a.run("pull", "http://127.0.0.1:1", "llm", "--timeout", "1s")
	if r.code == 0 || !strings.Contains(r.stderr, "is the server up") {
		t.Fatalf("pull from a server that is not there:\n%s", r)
	}
	a.requireUnchanged(before)
}

// TestPullKilled: a pull killed at any of its instants (fetched blobs
// written, a round recorded, its commit made and not yet applied) leaves a
// store fsck calls clean and no version; the next pull completes it.
func TestPullKilled(t *testing.T) {
	t.Parallel()
	fx := newRemoteFixture(t)
	src := newCLI(t)
	src.add(fx.base, "--name", "llm")
	dir := filepath.Join(t.TempDir(), "remote")
	src.ok("push", dir, "llm")
	for _, point := range []string{"blob-temp-written", "blobs-durable", "pull-blobs-recorded", "index-before-commit"} {
		t.Run(point, func(t *testing.T) {
			b := newCLI(t)
			b.ok("init")
			p := b.start([]string{"MSTORE_FAILPOINT=" + point}, "pull", dir, "llm", "--checkpoint-bytes", "1", "--jobs", "1")
			if out := p.wait(t); out.signal == 0 {
				t.Fatalf("pull did not die at %s: %s\n%s", point, out, p.stderr.String())
			}
			if ls := b.ok("ls"); strings.Contains(ls, "llm") {
				t.Fatalf("a killed pull recorded a version:\n%s", ls)
			}
			b.fsck()
			b.transfer(nil, "pull", dir, "llm")
			out := filepath.Join(t.TempDir(), "out")
			b.ok("checkout", "llm", out)
			requireSameTree(t, fx.base, out)
		})
	}
}

// TestPushKilled: a push to a store directory killed midway leaves that
// store clean, its ref where it was; the next push completes it.
func TestPushKilled(t *testing.T) {
	t.Parallel()
	fx := newRemoteFixture(t)
	a := newCLI(t)
	a.add(fx.base, "--name", "llm")
	a.add(fx.tuned, "--name", "llm2")
	for _, point := range []string{"blob-temp-written", "blobs-durable", "push-blobs-sent", "index-before-commit"} {
		t.Run(point, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "remote")
			a.ok("push", dir, "llm")
			remote := &cli{t: t, store: dir}
			before := remote.ok("--json", "ls")
			p := a.start([]string{"MSTORE_FAILPOINT=" + point}, "push", dir, "llm2", "--jobs", "1")
			if out := p.wait(t); out.signal == 0 {
				t.Fatalf("push did not die at %s: %s\n%s", point, out, p.stderr.String())
			}
			if after := remote.ok("--json", "ls"); after != before {
				t.Fatalf("a killed push changed the remote's names:\n%s\n%s", before, after)
			}
			remote.fsck()
			a.ok("push", dir, "llm2")
			b := newCLI(t)
			b.ok("pull", dir, "llm2")
			out := filepath.Join(t.TempDir(), "out")
			b.ok("checkout", "llm2", out)
			requireSameTree(t, fx.tuned, out)
		})
	}
}

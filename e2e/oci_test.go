package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/mstore/mstore/internal/remote/ociremote/ocitest"
)

// checkout --layout oci writes a ModelPack layout; add of it is the same
// version, and a checkout of that is byte-identical to the model added; a
// layout whose blob lies about its digest is refused.
func TestOCILayoutRoundTrip(t *testing.T) {
	t.Parallel()
	fx := newRemoteFixture(t)
	a, b := newCLI(t), newCLI(t)
	d := a.add(fx.base, "--name", "llm", "--tag", "v1").Digest
	out := filepath.Join(t.TempDir(), "layout")
	a.ok("checkout", "llm:v1", out, "--layout", "oci")
	if got := b.add(out).Digest; got != d {
		t.Fatalf("re-import gave %s, want %s", got, d)
	}
	back := filepath.Join(t.TempDir(), "back")
	b.ok("checkout", d, back)
	if !sameTree(readTree(t, back), readTree(t, fx.base)) {
		t.Fatal("the model taken back out of the layout differs from the one added")
	}
	a.fail("conflict", "checkout", "llm", out, "--layout", "oci")
	a.fail("schema_error", "checkout", "llm", filepath.Join(t.TempDir(), "x"), "--layout", "nope")
	a.fail("schema_error", "checkout", "llm", filepath.Join(t.TempDir(), "y"), "--layout", "oci", "--format", "gguf")

	var idx struct {
		Manifests []struct{ Digest string } `json:"manifests"`
	}
	raw, err := os.ReadFile(filepath.Join(out, "index.json"))
	if err != nil || json.Unmarshal(raw, &idx) != nil || len(idx.Manifests) != 1 {
		t.Fatalf("index.json: %s, %v", raw, err)
	}
	var man struct {
		Layers []struct{ Digest string } `json:"layers"`
	}
	mp := filepath.Join(out, "blobs", "sha256", idx.Manifests[0].Digest[len("sha256:"):])
	raw, _ = os.ReadFile(mp)
	if json.Unmarshal(raw, &man) != nil || len(man.Layers) < 2 {
		t.Fatalf("manifest: %s", raw)
	}
	p := filepath.Join(out, "blobs", "sha256", man.Layers[0].Digest[len("sha256:"):])
	blob, _ := os.ReadFile(p)
	blob[len(blob)/2] ^= 1
	os.WriteFile(p, blob, 0o644)
	newCLI(t).fail("integrity_error", "add", out)
}

// Push to and pull from a real registry behind htpasswd auth, through the
// binary: unauthenticated is unauthorized (exit 20); flags and a docker
// config.json work; a pull of a fine-tune after its base moves only what
// changed; pull again moves nothing.
func TestOCIRegistry(t *testing.T) {
	t.Parallel()
	reg := ocitest.Start(t, ocitest.Options{Auth: true})
	fx := newRemoteFixture(t)
	a, b := newCLI(t), newCLI(t)
	base := a.add(fx.base, "--name", "llm").Digest
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte(reg.Password+"\n"), 0o600)
	creds := []string{"--username", reg.User, "--password-file", pw}

	a.fail("unauthorized", "push", reg.URL("team/llm:v1"), "llm")
	pushed := a.transfer(nil, append([]string{"push", reg.URL("team/llm:v1"), "llm"}, creds...)...)
	if !pushed.TagCreated || pushed.Digest != base {
		t.Fatalf("push: %+v", pushed)
	}
	tuned := a.add(fx.tuned, "--name", "llm").Digest
	a.transfer(nil, append([]string{"push", reg.URL("team/llm:v2"), "llm"}, creds...)...)

	cfg := reg.DockerConfig(t)
	b.fail("unauthorized", "pull", reg.URL("team/llm:v1"))
	first := b.transfer(nil, "pull", reg.URL("team/llm:v1"), "--docker-config", cfg)
	if first.Digest != base || first.Name != "team/llm" || first.BytesMoved == 0 {
		t.Fatalf("pull v1: %+v", first)
	}
	second := b.transfer(nil, "pull", reg.URL("team/llm:v2"), "--docker-config", cfg)
	if second.Digest != tuned || second.BytesMoved == 0 || second.BytesMoved >= first.BytesMoved/2 {
		t.Fatalf("pull v2 after v1: %+v (v1 moved %d bytes); want only the changed tensor's chunks", second, first.BytesMoved)
	}
	t.Logf("pull v1 moved %d blobs, %d bytes; v2 after it %d blobs, %d bytes", first.BlobsMoved, first.BytesMoved, second.BlobsMoved, second.BytesMoved)
	again := b.transfer(nil, "pull", reg.URL("team/llm:v2"), "--docker-config", cfg)
	if again.BlobsMoved != 0 || again.BytesMoved != 0 {
		t.Fatalf("pull again: %+v, want nothing moved", again)
	}
	back := filepath.Join(t.TempDir(), "back")
	b.ok("checkout", "team/llm:v2", back)
	if !sameTree(readTree(t, back), readTree(t, fx.tuned)) {
		t.Fatal("the pulled fine-tune differs from the one pushed")
	}
	a.fail("conflict", append([]string{"push", reg.URL("team/llm:v1"), "llm"}, creds...)...)

	// A named remote for the registry (and a repository prefix): push and
	// pull take NAME[:TAG] as for any remote, the repository is
	// PREFIX/NAME, the local ref NAME.
	for _, s := range []*cli{a, b} {
		s.ok("remote", "add", "reg", reg.URL("team"))
	}
	a.ok("tag", "llm:v3", "llm")
	if res := a.transfer(nil, append([]string{"push", "reg", "llm:v3"}, creds...)...); !res.TagCreated || res.Digest != tuned {
		t.Fatalf("push through the named registry: %+v", res)
	}
	c := newCLI(t)
	c.ok("remote", "add", "reg", reg.URL("team"))
	named := c.transfer(nil, "pull", "reg", "llm:v3", "--docker-config", cfg)
	if named.Name != "llm" || named.Digest != tuned {
		t.Fatalf("pull through the named registry: %+v, want llm at %s", named, tuned)
	}
	if again := b.transfer(nil, "pull", "reg", "llm:v3", "--docker-config", cfg); again.BlobsMoved != 0 || again.Name != "llm" {
		t.Fatalf("pull into a store that has the bytes: %+v", again)
	}
	c.fail("schema_error", "pull", "reg", "--docker-config", cfg)
	c.fail("schema_error", "gc", "--remote", "reg", "--dry-run") // a registry holds whole files: no blob gc
}

package ociremote

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/layouts/oci/modelpack"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/remote/ociremote/ocitest"
	"github.com/mstore/mstore/internal/remote/pathremote"
	"github.com/mstore/mstore/internal/remote/remotetest"
	"github.com/mstore/mstore/internal/remote/transfer"
)

// TestConformance runs the one suite against a real registry: its read
// cases, on versions put there as mstore puts them (ociremote.Push of a
// local version under a tag; the ref REPO is the tag "latest"), a layer
// damaged in the registry's storage, and the refusal of every write made
// through remote.Remote.
func TestConformance(t *testing.T) {
	reg := ocitest.Start(t, ocitest.Options{})
	seed := func(t *testing.T, f remotetest.Fixture) remote.Remote {
		ctx := context.Background()
		// The suite's versions, taken into a local store as a pull takes
		// them (the digests stay the suite's), then pushed.
		src, err := pathremote.Open(filepath.Join(t.TempDir(), "src"), true)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		remotetest.WriteFixture(t, src, f)
		st := newStore(t)
		push := func(version, tag string) {
			if _, err := transfer.Pull(ctx, st, src, transfer.PullOptions{Version: version}); err != nil {
				t.Fatal(err)
			}
			res, err := Push(ctx, st, open(t, reg.URL(f.Name+":"+tag), Options{}), PushOptions{Version: version})
			if err != nil || !res.TagCreated {
				t.Fatalf("push %s as %s: %+v, %v", version, tag, res, err)
			}
		}
		for tag := range f.Tags {
			push(f.Name+":"+tag, tag)
		}
		push(f.Name, "latest")
		return open(t, reg.URL(f.Name), Options{})
	}
	// damage flips a byte in the middle of blob d inside the file layer
	// that holds it, in the registry's filesystem storage.
	damage := func(t *testing.T, r remote.Remote, f remotetest.Fixture, d objects.Digest) {
		m, err := objects.DecodeManifest(f.Ref.Encoded)
		if err != nil {
			t.Fatal(err)
		}
		sp, ok := modelpack.Locate(m)[d]
		if !ok {
			t.Fatalf("blob %s is in no file of the ref's version", d.Short())
		}
		a, _, err := r.(*Remote).fetchArtifact(context.Background(), "latest")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range a.Layers {
			if l.Path != sp.Path {
				continue
			}
			remotetest.FlipByte(t, reg.BlobFile(l.Desc.Digest.String()), sp.Off+sp.Size/2)
			return
		}
		t.Fatalf("no layer holds %s", sp.Path)
	}
	remotetest.Run(t, nil, remotetest.Seeded(seed), remotetest.Tamper(damage),
		remotetest.ReadOnly(errs.UnsupportedVersion, "`mstore push oci://"))
}

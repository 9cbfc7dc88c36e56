package ociremote

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	bolt "go.etcd.io/bbolt"
	"oras.land/oras-go/v2"
	orasoci "oras.land/oras-go/v2/content/oci"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/errs"
	ocilayout "github.com/mstore/mstore/internal/layouts/oci"
	"github.com/mstore/mstore/internal/layouts/oci/modelpack"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/remote/ociremote/ocitest"
	"github.com/mstore/mstore/internal/remote/transfer"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

func newStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "store"), true, store.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// added returns a store holding a model built from spec, named name.
func added(t *testing.T, st *store.Store, spec testmodel.Spec, name string) objects.Digest {
	t.Helper()
	files, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), name)
	if err := testmodel.Write(dir, files); err != nil {
		t.Fatal(err)
	}
	res, err := archiver.Add(context.Background(), st, dir, archiver.Options{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return res.Digest
}

func open(t *testing.T, u string, o Options) *Remote {
	t.Helper()
	r, err := Open(u, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func pull(t *testing.T, st *store.Store, u string, o Options, as string) (*transfer.Result, error) {
	t.Helper()
	return Pull(context.Background(), st, open(t, u, o), transfer.PullOptions{As: as})
}

// Push, pull, pull again (nothing moves), pull pinned by the manifest's
// digest, push again (nothing moves), a tag that would move (conflict).
func TestPushPull(t *testing.T) {
	reg := ocitest.Start(t, ocitest.Options{})
	ctx := context.Background()
	src := newStore(t)
	d := added(t, src, testmodel.Tiny, "tiny")
	u := reg.URL("models/tiny:v1")
	res, err := Push(ctx, src, open(t, u, Options{}), PushOptions{Version: "tiny"})
	if err != nil || !res.TagCreated || res.BlobsMoved < 3 || res.Digest != d {
		t.Fatalf("push: %+v, %v", res, err)
	}
	res, err = Push(ctx, src, open(t, u, Options{}), PushOptions{Version: "tiny"})
	if err != nil || res.TagCreated || res.BlobsMoved != 0 {
		t.Fatalf("push again: %+v, %v; want nothing moved", res, err)
	}

	dst := newStore(t)
	res, err = pull(t, dst, u, Options{}, "")
	if err != nil || res.Digest != d || res.BlobsMoved == 0 || !res.TagCreated || res.Name != "models/tiny" {
		t.Fatalf("pull: %+v, %v", res, err)
	}
	res, err = pull(t, dst, u, Options{}, "")
	if err != nil || res.Digest != d || res.BlobsMoved != 0 || res.BytesMoved != 0 {
		t.Fatalf("pull again: %+v, %v; want nothing moved", res, err)
	}

	r := open(t, u, Options{})
	desc, err := r.repo.Resolve(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	res, err = pull(t, newStore(t), reg.URL("models/tiny@"+desc.Digest.String()), Options{}, "pinned")
	if err != nil || res.Digest != d || res.Name != "pinned" || res.Tag != "" {
		t.Fatalf("pinned pull: %+v, %v", res, err)
	}
	absent := "sha256:" + objects.Sum([]byte("absent")).String()
	if _, err := pull(t, newStore(t), reg.URL("models/tiny@"+absent), Options{}, ""); errs.ClassOf(err) != errs.NotFound {
		t.Fatalf("pull of an absent digest: %v, want not_found", err)
	}
	if _, err := pull(t, newStore(t), reg.URL("models/tiny:nope"), Options{}, ""); errs.ClassOf(err) != errs.NotFound {
		t.Fatalf("pull of an absent tag: %v, want not_found", err)
	}

	other := testmodel.Tiny
	other.Seed = 2
	added(t, src, other, "tiny")
	if _, err := Push(ctx, src, open(t, u, Options{}), PushOptions{Version: "tiny"}); errs.ClassOf(err) != errs.Conflict {
		t.Fatalf("push of another version to the tag: %v, want conflict", err)
	}
	if _, err := Push(ctx, src, open(t, reg.URL("models/tiny"), Options{}), PushOptions{Version: "tiny"}); errs.ClassOf(err) != errs.SchemaError {
		t.Fatalf("push without a tag: %v, want schema_error", err)
	}
	// The second version shares the first's config.json and more: only
	// the layers the registry lacks move, and a mount from the first
	// repository moves no layer at all.
	res, err = Push(ctx, src, open(t, u[:len(u)-1]+"2", Options{}), PushOptions{Version: "tiny"})
	if err != nil || res.BlobsPresent == 0 {
		t.Fatalf("push of v2: %+v, %v; want the shared layers skipped", res, err)
	}
	res, err = Push(ctx, src, open(t, reg.URL("mirror/tiny:v2"), Options{}), PushOptions{Version: "tiny", MountFrom: []string{"models/tiny"}})
	if err != nil || res.BlobsMoved > 3 {
		t.Fatalf("push with a mount: %+v, %v; want only config, map and manifest sent", res, err)
	}
}

// Behind auth: no credentials is unauthorized (push and pull); flags and a
// docker config.json both work.
func TestAuth(t *testing.T) {
	reg := ocitest.Start(t, ocitest.Options{Auth: true})
	ctx := context.Background()
	src := newStore(t)
	d := added(t, src, testmodel.Tiny, "tiny")
	u := reg.URL("models/tiny:v1")
	none := Options{DockerConfig: filepath.Join(t.TempDir(), "none.json")}
	if _, err := Push(ctx, src, open(t, u, none), PushOptions{Version: "tiny"}); errs.ClassOf(err) != errs.Unauthorized {
		t.Fatalf("push without credentials: %v, want unauthorized", err)
	}
	wrong := Options{Username: reg.User, Password: "wrong"}
	if _, err := Push(ctx, src, open(t, u, wrong), PushOptions{Version: "tiny"}); errs.ClassOf(err) != errs.Unauthorized {
		t.Fatalf("push with a wrong password: %v, want unauthorized", err)
	}
	if _, err := Push(ctx, src, open(t, u, Options{Username: reg.User, Password: reg.Password}), PushOptions{Version: "tiny"}); err != nil {
		t.Fatal(err)
	}
	if _, err := pull(t, newStore(t), u, none, ""); errs.ClassOf(err) != errs.Unauthorized {
		t.Fatalf("pull without credentials: %v, want unauthorized", err)
	}
	res, err := pull(t, newStore(t), u, Options{DockerConfig: reg.DockerConfig(t)}, "")
	if err != nil || res.Digest != d {
		t.Fatalf("pull with the docker config: %+v, %v", res, err)
	}
}

func TestParse(t *testing.T) {
	good := map[string]Ref{
		"oci://h:5000/a/b:v1":                     {Host: "h:5000", Repo: "a/b", Tag: "v1"},
		"oci://h/a":                               {Host: "h", Repo: "a"},
		"oci://h/a@sha256:" + sha("x"):            {Host: "h", Repo: "a", Digest: digest.FromString("x")},
		"oci://[::1]:5000/a-b/c.d_e:1.0-rc":       {Host: "[::1]:5000", Repo: "a-b/c.d_e", Tag: "1.0-rc"},
		"oci://h/a:t@sha256:" + sha("y"):          {Host: "h", Repo: "a", Tag: "t", Digest: digest.FromString("y")},
		"oci://registry.example.com/org/model:v2": {Host: "registry.example.com", Repo: "org/model", Tag: "v2"},
	}
	for u, want := range good {
		got, err := Parse(u)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", u, got, err, want)
		}
	}
	for _, u := range []string{"oci://h", "oci:///a", "oci://h/A", "oci://h/a/../b", "oci://h/a:", "oci://h/a:-x", "oci://h/a@md5:00",
		"oci://u:p@h/a", "oci://h/a@sha256:abc", "http://h/a", "oci://h/a//b", "oci://h/.a"} {
		if _, err := Parse(u); errs.ClassOf(err) != errs.SchemaError {
			t.Errorf("Parse(%q): %v, want schema_error", u, err)
		}
	}
}

func sha(s string) string {
	return digest.FromString(s).Encoded()
}

// Behind token auth (WWW-Authenticate: Bearer realm=…, service, scope): the
// token flow with the account's credentials works; without them the
// anonymous token grants nothing and the push is unauthorized.
func TestTokenFlow(t *testing.T) {
	reg := ocitest.Start(t, ocitest.Options{Token: true})
	ctx := context.Background()
	src := newStore(t)
	d := added(t, src, testmodel.Tiny, "tiny")
	u := reg.URL("models/tiny:v1")
	none := Options{DockerConfig: filepath.Join(t.TempDir(), "none.json")}
	if _, err := Push(ctx, src, open(t, u, none), PushOptions{Version: "tiny"}); errs.ClassOf(err) != errs.Unauthorized {
		t.Fatalf("push without credentials: %v, want unauthorized", err)
	}
	creds := Options{Username: reg.User, Password: reg.Password}
	if _, err := Push(ctx, src, open(t, u, creds), PushOptions{Version: "tiny"}); err != nil {
		t.Fatal(err)
	}
	res, err := pull(t, newStore(t), u, Options{DockerConfig: reg.DockerConfig(t)}, "")
	if err != nil || res.Digest != d {
		t.Fatalf("pull with a token: %+v, %v", res, err)
	}
	if _, err := pull(t, newStore(t), u, none, ""); errs.ClassOf(err) != errs.Unauthorized {
		t.Fatalf("pull without credentials: %v, want unauthorized", err)
	}
}

// An artifact another tool pushed (raw layers, no mstore map; pushed here
// with oras-go as ORAS would) is pulled whole and added: the same version
// as adding the model directory.
func TestPullForeignArtifact(t *testing.T) {
	reg := ocitest.Start(t, ocitest.Options{})
	ctx := context.Background()
	files, err := testmodel.Tiny.Build()
	if err != nil {
		t.Fatal(err)
	}
	want := added(t, newStore(t), testmodel.Tiny, "tiny")
	r := open(t, reg.URL("kit/tiny:v1"), Options{})
	push := func(mt string, b []byte, ann map[string]string) ocispec.Descriptor {
		d := ocispec.Descriptor{MediaType: mt, Digest: digest.FromBytes(b), Size: int64(len(b)), Annotations: ann}
		if err := r.repo.Push(ctx, d, bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
		return d
	}
	man := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: modelpack.ArtifactType,
		Config: push(modelpack.MediaTypeConfig, []byte(`{"descriptor":{"name":"tiny"},"modelfs":{"type":"layers","diffIds":[]},"config":{}}`), nil)}
	man.SchemaVersion = 2
	var paths []string
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		man.Layers = append(man.Layers, push(modelpack.MediaTypeWeight, files[p], map[string]string{modelpack.AnnotationFilepath: p}))
	}
	mb, _ := json.Marshal(man)
	md := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(mb), Size: int64(len(mb))}
	if err := r.repo.PushReference(ctx, md, bytes.NewReader(mb), "v1"); err != nil {
		t.Fatal(err)
	}
	res, err := pull(t, newStore(t), reg.URL("kit/tiny:v1"), Options{}, "")
	if err != nil || res.Digest != want || res.Name != "kit/tiny" || res.Tag != "v1" || res.BlobsMoved != len(files)+1 {
		t.Fatalf("pull of a foreign artifact: %+v, %v; want %s", res, err, want)
	}
}

// A registry whose stored layer no longer matches: the pull, reading
// chunks by range, finds it (integrity_error) and records nothing.
func TestPullFromADamagedRegistry(t *testing.T) {
	reg := ocitest.Start(t, ocitest.Options{})
	ctx := context.Background()
	src := newStore(t)
	added(t, src, testmodel.Tiny, "tiny")
	u := reg.URL("models/tiny:v1")
	if _, err := Push(ctx, src, open(t, u, Options{}), PushOptions{Version: "tiny"}); err != nil {
		t.Fatal(err)
	}
	a, _, err := open(t, u, Options{}).fetchArtifact(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	p := reg.BlobFile(a.Layers[0].Desc.Digest.String())
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	dst := newStore(t)
	if _, err := pull(t, dst, u, Options{}, ""); errs.ClassOf(err) != errs.IntegrityError {
		t.Fatalf("pull of a damaged layer: %v, want integrity_error", err)
	}
	if _, err := pull(t, dst, u, Options{}, ""); errs.ClassOf(err) != errs.IntegrityError {
		t.Fatalf("pull again: %v, want integrity_error", err)
	}
	dst.View(func(tx *bolt.Tx) error {
		if _, err := refs.Current(tx, "models/tiny"); errs.ClassOf(err) != errs.NotFound {
			t.Errorf("after a failed pull the ref is there: %v", err)
		}
		return nil
	})
}

// ORAS reads and writes what mstore does: a layout mstore wrote, copied
// to the registry by oras-go, pulls back as the same version; a version
// mstore pushed, copied by oras-go into a layout of its own, adds back as
// the same version.
func TestORASInterop(t *testing.T) {
	reg := ocitest.Start(t, ocitest.Options{})
	ctx := context.Background()
	src := newStore(t)
	d := added(t, src, testmodel.Tiny, "tiny")

	lay := filepath.Join(t.TempDir(), "layout")
	if _, err := ocilayout.Checkout(ctx, src, d, lay, ocilayout.CheckoutOptions{Name: "tiny", Tag: "v1"}); err != nil {
		t.Fatal(err)
	}
	ros, err := orasoci.NewFromFS(ctx, os.DirFS(lay))
	if err != nil {
		t.Fatal(err)
	}
	copied := open(t, reg.URL("copied/tiny:v1"), Options{})
	if _, err := oras.Copy(ctx, ros, "v1", copied.repo, "v1", oras.DefaultCopyOptions); err != nil {
		t.Fatal(err)
	}
	if res, err := pull(t, newStore(t), reg.URL("copied/tiny:v1"), Options{}, ""); err != nil || res.Digest != d {
		t.Fatalf("pull of what oras copied: %+v, %v; want %s", res, err, d)
	}

	if _, err := Push(ctx, src, open(t, reg.URL("models/tiny:v1"), Options{}), PushOptions{Version: "tiny"}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "oras-layout")
	dst, err := orasoci.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := oras.Copy(ctx, open(t, reg.URL("models/tiny:v1"), Options{}).repo, "v1", dst, "v1", oras.DefaultCopyOptions); err != nil {
		t.Fatal(err)
	}
	res, err := ocilayout.Add(ctx, newStore(t), dir, archiver.Options{Name: "tiny"})
	if err != nil || res.Digest != d {
		t.Fatalf("add of the layout oras wrote: %+v, %v; want %s", res, err, d)
	}
}

package remotetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/store"
)

// Fixture is what a read case needs a remote to hold: under Name, the ref
// at Ref and each tag of Tags at its version.
type Fixture struct {
	Name string
	Ref  Version
	Tags map[string]Version
}

// Seeder returns a new remote holding f, put there as the implementation's
// own writer does (for a registry: a push of each version under its tag).
type Seeder func(t *testing.T, f Fixture) remote.Remote

// Seeded gives Run the seeding of its read cases. Without it they are
// seeded through the remote's own PutBlobs, PutManifest, CreateTag and
// MoveRef (WriteFixture), on a remote from open.
func Seeded(seed Seeder) Option { return func(o *options) { o.seed = seed } }

// Tamper gives Run a way to damage blob d where the remote r (seeded)
// keeps it, so that the suite sees what a corrupt remote gives.
func Tamper(damage func(t *testing.T, r remote.Remote, f Fixture, d objects.Digest)) Option {
	return func(o *options) { o.tamper = damage }
}

// ReadOnly says the remote takes no writes through remote.Remote: the
// write cases do not run, and each write method must be refused with
// class, in a message that names hint (what to do instead).
func ReadOnly(class errs.Class, hint string) Option {
	return func(o *options) { o.readOnly, o.hint = class, hint }
}

// WriteFixture puts f on r through its write methods: blobs in batches
// under the bounds, manifests, tags, then the ref.
func WriteFixture(t *testing.T, r remote.Remote, f Fixture) {
	t.Helper()
	ctx := context.Background()
	put := func(v Version) {
		for i := 0; i < len(v.Blobs); {
			j, n := i, 0
			for j < len(v.Blobs) && j-i < remote.MaxBatchBlobs && (j == i || n+len(v.Blobs[j].Data) <= remote.MaxBatchBytes) {
				n += len(v.Blobs[j].Data)
				j++
			}
			if err := r.PutBlobs(ctx, v.Blobs[i:j]); err != nil {
				t.Fatal(err)
			}
			i = j
		}
		if _, err := r.PutManifest(ctx, v.Digest, v.Encoded); err != nil {
			t.Fatal(err)
		}
	}
	for _, tag := range sortedTags(f) {
		put(f.Tags[tag])
		if _, err := r.CreateTag(ctx, f.Name, tag, f.Tags[tag].Digest); err != nil {
			t.Fatal(err)
		}
	}
	put(f.Ref)
	if err := r.MoveRef(ctx, f.Name, objects.Digest{}, f.Ref.Digest, "seed"); err != nil {
		t.Fatal(err)
	}
}

func sortedTags(f Fixture) []string {
	var tags []string
	for tag := range f.Tags {
		tags = append(tags, tag)
	}
	slices.Sort(tags)
	return tags
}

// resolve reads f's ref and tags, checking them: a remote answers for the
// blobs and manifests of the versions its reader has resolved (a registry
// has no index of blobs by BLAKE3 but the map of each artifact it reads).
func resolve(t *testing.T, r remote.Remote, f Fixture) {
	t.Helper()
	ctx := context.Background()
	info, err := r.Ref(ctx, f.Name)
	if err != nil || info.Current != f.Ref.Digest || len(info.History) == 0 || info.History[0] != f.Ref.Digest {
		t.Fatalf("Ref %s: %+v, %v; want it at %s", f.Name, info, err, f.Ref.Digest.Short())
	}
	for _, tag := range sortedTags(f) {
		if d, err := r.Tag(ctx, f.Name, tag); err != nil || d != f.Tags[tag].Digest {
			t.Fatalf("Tag %s:%s: %s, %v; want %s", f.Name, tag, d.Short(), err, f.Tags[tag].Digest.Short())
		}
	}
}

// readCases check what every remote must do when read, on one fixture.
func readCases(t *testing.T, seed Seeder) {
	ctx := context.Background()
	a := MakeVersion(t, 40, 5<<20+1234) // two chunks: 4 MiB and the rest
	small := MakeManySmall(t, 41, 60)
	big := MakeVersion(t, 42, 4*objects.ChunkSize+1) // just over MaxBatchBytes, in five chunks
	f := Fixture{Name: "acme/read", Ref: a, Tags: map[string]Version{"v1": a, "small": small, "big": big}}
	r := seed(t, f)
	absent := objects.Sum([]byte("absent"))

	t.Run("ref and tags resolve, unknown names are not_found", func(t *testing.T) {
		resolve(t, r, f)
		_, err := r.Ref(ctx, "acme/other")
		wantClass(t, err, errs.NotFound, "Ref of an unknown name")
		_, err = r.Tag(ctx, f.Name, "nope")
		wantClass(t, err, errs.NotFound, "Tag of an unknown tag")
		_, err = r.Tag(ctx, "acme/other", "v1")
		wantClass(t, err, errs.NotFound, "Tag of an unknown name")
		_, err = r.GetManifest(ctx, absent)
		wantClass(t, err, errs.NotFound, "GetManifest of an unknown digest")
		_, err = r.GetBlob(ctx, absent, 0, -1)
		wantClass(t, err, errs.NotFound, "GetBlob of an unknown digest")
	})

	t.Run("manifests hash to their digest", func(t *testing.T) {
		resolve(t, r, f)
		for _, v := range []Version{a, small, big} {
			got, err := r.GetManifest(ctx, v.Digest)
			if err != nil || objects.Sum(got) != v.Digest || !bytes.Equal(got, v.Encoded) {
				t.Fatalf("GetManifest %s: %d bytes, %v", v.Digest.Short(), len(got), err)
			}
		}
	})

	t.Run("HasBlobs, present and absent, in batches", func(t *testing.T) {
		resolve(t, r, f)
		var ask []objects.Digest
		var want []bool
		for i, d := range append(append(digests(a.Blobs), digests(small.Blobs)...), digests(big.Blobs)...) {
			ask, want = append(ask, d), append(want, true)
			if i%5 == 0 {
				ask, want = append(ask, objects.Sum([]byte{byte(i), 'x'})), append(want, false)
			}
		}
		for _, batch := range [][2]int{{0, len(ask)}, {3, 4}, {0, 0}} {
			has, err := r.HasBlobs(ctx, ask[batch[0]:batch[1]])
			if err != nil || !slices.Equal(has, want[batch[0]:batch[1]]) {
				t.Fatalf("HasBlobs of %v: %v, %v; want %v", batch, has, err, want[batch[0]:batch[1]])
			}
		}
	})

	t.Run("GetBlob by range; past the end is refused", func(t *testing.T) {
		resolve(t, r, f)
		b0, b1 := a.Blobs[0], a.Blobs[1]
		for _, c := range []struct {
			b       remote.Blob
			off, n  int64
			from, e int
		}{
			{b1, 0, -1, 0, len(b1.Data)},
			{b0, 1000, 5000, 1000, 6000},
			{b1, 100, -1, 100, len(b1.Data)},
			{b0, int64(len(b0.Data)) - 7, 7, len(b0.Data) - 7, len(b0.Data)},
		} {
			got, err := r.GetBlob(ctx, c.b.Digest, c.off, c.n)
			if err != nil || !bytes.Equal(got, c.b.Data[c.from:c.e]) {
				t.Fatalf("GetBlob %s %d+%d: %d bytes, %v", c.b.Digest.Short(), c.off, c.n, len(got), err)
			}
		}
		size := int64(len(b1.Data))
		for _, c := range [][2]int64{{size + 1, -1}, {size + 1, 0}, {10, size}, {size - 1, 2}, {-1, 5}} {
			_, err := r.GetBlob(ctx, b1.Digest, c[0], c[1])
			wantClass(t, err, errs.SchemaError, fmt.Sprintf("GetBlob %d+%d of a blob of %d bytes", c[0], c[1], size))
		}
	})

	t.Run("GetBlobs of small blobs, in any order, mixed", func(t *testing.T) {
		resolve(t, r, f)
		var ds []objects.Digest
		var want [][]byte
		for i := len(small.Blobs) - 1; i >= 0; i -= 3 {
			ds, want = append(ds, small.Blobs[i].Digest), append(want, small.Blobs[i].Data)
		}
		// One of another version in the middle, and one asked twice.
		ds = slices.Insert(ds, len(ds)/2, a.Blobs[1].Digest, ds[0])
		want = slices.Insert(want, len(want)/2, a.Blobs[1].Data, want[0])
		got, err := r.GetBlobs(ctx, ds)
		if err != nil || len(got) != len(ds) {
			t.Fatalf("GetBlobs: %d, %v", len(got), err)
		}
		for i := range ds {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("GetBlobs[%d] is not blob %s", i, ds[i].Short())
			}
		}
		one, err := r.GetBlob(ctx, small.Blobs[7].Digest, 2, 5)
		if err != nil || !bytes.Equal(one, small.Blobs[7].Data[2:7]) {
			t.Fatalf("GetBlob range of a small blob: %q, %v", one, err)
		}
		for _, ask := range [][]objects.Digest{{ds[0], absent}, {absent, ds[0]}} {
			_, err = r.GetBlobs(ctx, ask)
			wantClass(t, err, errs.NotFound, "GetBlobs with an unknown blob")
		}
	})

	t.Run("GetBlobs and HasBlobs over their bounds are refused", func(t *testing.T) {
		resolve(t, r, f)
		_, err := r.GetBlobs(ctx, digests(big.Blobs))
		wantClass(t, err, errs.SizeLimitExceeded, "GetBlobs of more than MaxBatchBytes")
		many := make([]objects.Digest, remote.MaxBatchBlobs+1)
		for i := range many {
			many[i] = small.Blobs[i%len(small.Blobs)].Digest
		}
		_, err = r.GetBlobs(ctx, many)
		wantClass(t, err, errs.SizeLimitExceeded, "GetBlobs of more than MaxBatchBlobs")
		asks := make([]objects.Digest, remote.MaxHasBlobs+1)
		for i := range asks {
			asks[i] = small.Blobs[i%len(small.Blobs)].Digest
		}
		_, err = r.HasBlobs(ctx, asks)
		wantClass(t, err, errs.SizeLimitExceeded, "HasBlobs of more than MaxHasBlobs")
	})
}

// tamperCase damages one blob of a seeded remote: reading it whole gives
// an integrity_error or bytes that do not hash to it (the interface's
// reads are not trusted: the caller's check then refuses them), never its
// bytes or a not_found; the blob beside it still reads right.
func tamperCase(t *testing.T, seed Seeder, damage func(*testing.T, remote.Remote, Fixture, objects.Digest)) {
	ctx := context.Background()
	v := MakeVersion(t, 43, 5<<20+1234)
	f := Fixture{Name: "acme/damaged", Ref: v, Tags: map[string]Version{"v1": v}}
	r := seed(t, f)
	resolve(t, r, f)
	bad, good := v.Blobs[1], v.Blobs[0]
	damage(t, r, f, bad.Digest)
	check := func(what string, got []byte, err error) {
		t.Helper()
		t.Logf("%s of the damaged blob: %d bytes, %v", what, len(got), err)
		switch {
		case errs.ClassOf(err) == errs.IntegrityError:
		case err != nil:
			t.Fatalf("%s of a damaged blob: %v, want integrity_error", what, err)
		case objects.Sum(got) == bad.Digest:
			t.Fatalf("%s of a damaged blob gave its bytes: the damage did not reach the remote", what)
		}
	}
	got, err := r.GetBlob(ctx, bad.Digest, 0, -1)
	check("GetBlob", got, err)
	all, err := r.GetBlobs(ctx, []objects.Digest{good.Digest, bad.Digest})
	if err == nil && len(all) != 2 {
		t.Fatalf("GetBlobs: %d blobs", len(all))
	}
	if err == nil {
		got = all[1]
	}
	check("GetBlobs", got, err)
	if got, err := r.GetBlob(ctx, good.Digest, 0, -1); err != nil || !bytes.Equal(got, good.Data) {
		t.Fatalf("GetBlob of the blob beside the damaged one: %d bytes, %v", len(got), err)
	}
}

// refusedWrites: a read-only remote refuses each write with its class and
// a message that says what to do, and holds nothing of what was offered.
func refusedWrites(t *testing.T, seed Seeder, class errs.Class, hint string) {
	ctx := context.Background()
	v, w := MakeVersion(t, 44, 1000), MakeVersion(t, 45, 2000)
	f := Fixture{Name: "acme/ro", Ref: v, Tags: map[string]Version{"v1": v}}
	r := seed(t, f)
	resolve(t, r, f)
	refused := func(what string, err error) {
		t.Helper()
		wantClass(t, err, class, what)
		if !strings.Contains(err.Error(), hint) {
			t.Fatalf("%s: %q does not say %q", what, err, hint)
		}
	}
	refused("PutBlobs", r.PutBlobs(ctx, w.Blobs))
	_, err := r.PutManifest(ctx, w.Digest, w.Encoded)
	refused("PutManifest", err)
	refused("MoveRef", r.MoveRef(ctx, f.Name, v.Digest, w.Digest, ""))
	_, err = r.CreateTag(ctx, f.Name, "v2", v.Digest)
	refused("CreateTag", err)
	if has, err := r.HasBlobs(ctx, digests(w.Blobs)); err != nil || has[0] {
		t.Fatalf("a refused blob is there: %v, %v", has, err)
	}
	if _, err := r.Tag(ctx, f.Name, "v2"); errs.ClassOf(err) != errs.NotFound {
		t.Fatalf("a refused tag is there: %v", err)
	}
	resolve(t, r, f)
}

// DamageLoose flips a byte in the middle of the loose file of blob d in
// the store at dir: Tamper's damage for the remotes a store backs.
func DamageLoose(t *testing.T, dir string, d objects.Digest) {
	t.Helper()
	st, err := store.Open(dir, false, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	FlipByte(t, st.BlobPath(d), -1)
}

// FlipByte flips one bit of the byte at off in the file p (off < 0: the
// middle one), as a disk or a tampering server would.
func FlipByte(t *testing.T, p string, off int64) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off = int64(len(b) / 2)
	}
	b[off] ^= 0x40
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

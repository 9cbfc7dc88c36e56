package remotetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
)

// Version is a manifest made for tests with the blobs it needs.
type Version struct {
	Digest  objects.Digest
	Encoded []byte
	Blobs   []remote.Blob
}

// MakeVersion builds a version of one file: a run of size random bytes
// (seeded) kept as a frame, cut into chunks as add cuts it.
func MakeVersion(t testing.TB, seed uint64, size int64) Version {
	t.Helper()
	data := make([]byte, size)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	return MakeVersionOf(t, data)
}

// MakeVersionOf is MakeVersion of the given bytes.
func MakeVersionOf(t testing.TB, data []byte) Version {
	t.Helper()
	size := int64(len(data))
	var v Version
	run := &objects.Data{Digest: objects.Sum(data)}
	for i := range objects.ChunkCount(size) {
		off, n := objects.ChunkBounds(size, i)
		d := objects.Sum(data[off : off+n])
		run.Chunks = append(run.Chunks, d)
		v.Blobs = append(v.Blobs, remote.Blob{Digest: d, Data: data[off : off+n]})
	}
	m := &objects.Manifest{Schema: objects.ManifestSchema, Format: "opaque", Files: []objects.File{{
		Path: "blob.bin", Size: size, Digest: run.Digest, Role: objects.RoleOther,
		Extents: []objects.Extent{{Kind: objects.ExtentFrame, Size: size, Data: run}},
	}}, Tensors: []objects.Tensor{}}
	d, enc, err := m.Digest()
	if err != nil {
		t.Fatal(err)
	}
	v.Digest, v.Encoded = d, enc
	return v
}

func wantClass(t *testing.T, err error, c errs.Class, what string) {
	t.Helper()
	if errs.ClassOf(err) != c {
		t.Fatalf("%s: got %v, want %s", what, err, c.Key())
	}
}

func digests(blobs []remote.Blob) []objects.Digest {
	out := make([]objects.Digest, len(blobs))
	for i, b := range blobs {
		out[i] = b.Digest
	}
	return out
}

// Option adds to what Run checks.
type Option func(*options)

type options struct {
	pair     func(t *testing.T) (remote.Remote, remote.Remote)
	seed     Seeder
	tamper   func(*testing.T, remote.Remote, Fixture, objects.Digest)
	readOnly errs.Class
	hint     string
}

// TwoClients gives Run two clients of one new, empty remote (two processes'
// views of it): what one writes, the other must see, whatever either keeps
// in memory. Without it, the cases that need two use one client twice.
func TwoClients(pair func(t *testing.T) (remote.Remote, remote.Remote)) Option {
	return func(o *options) { o.pair = pair }
}

// Run runs the suite. open returns a new, empty remote each time (nil
// with ReadOnly, whose remote comes from Seeded). doc.go says which cases
// run for which kind of remote.
func Run(t *testing.T, open func(t *testing.T) remote.Remote, opts ...Option) {
	ctx := context.Background()
	var o options
	for _, f := range opts {
		f(&o)
	}
	if o.seed == nil {
		o.seed = func(t *testing.T, f Fixture) remote.Remote { r := open(t); WriteFixture(t, r, f); return r }
	}
	t.Run("read", func(t *testing.T) { readCases(t, o.seed) })
	if o.tamper != nil {
		t.Run("a damaged blob", func(t *testing.T) { tamperCase(t, o.seed, o.tamper) })
	}
	if o.readOnly != 0 {
		t.Run("writes are refused", func(t *testing.T) { refusedWrites(t, o.seed, o.readOnly, o.hint) })
		return
	}
	if o.pair == nil {
		o.pair = func(t *testing.T) (remote.Remote, remote.Remote) { r := open(t); return r, r }
	}
	t.Run("many small blobs, written and read by two clients", func(t *testing.T) {
		manySmall(t, o.pair)
	})
	t.Run("coded blobs, where the remote takes them", func(t *testing.T) {
		coderCases(t, open(t))
	})
	small := func(t *testing.T, r remote.Remote, seed uint64) Version {
		t.Helper()
		v := MakeVersion(t, seed, 5<<20+1234) // two chunks: 4 MiB and the rest
		if err := r.PutBlobs(ctx, v.Blobs); err != nil {
			t.Fatal(err)
		}
		if _, err := r.PutManifest(ctx, v.Digest, v.Encoded); err != nil {
			t.Fatal(err)
		}
		return v
	}

	t.Run("blobs", func(t *testing.T) {
		r := open(t)
		v := MakeVersion(t, 1, 5<<20)
		ds := digests(v.Blobs)
		has, err := r.HasBlobs(ctx, ds)
		if err != nil || len(has) != len(ds) || has[0] || has[1] {
			t.Fatalf("empty remote: HasBlobs %v, %v", has, err)
		}
		_, err = r.GetBlob(ctx, ds[0], 0, -1)
		wantClass(t, err, errs.NotFound, "GetBlob of a missing blob")
		if err := r.PutBlobs(ctx, v.Blobs[:1]); err != nil {
			t.Fatal(err)
		}
		if err := r.PutBlobs(ctx, v.Blobs); err != nil { // one present already
			t.Fatal(err)
		}
		has, err = r.HasBlobs(ctx, append(ds, objects.Sum([]byte("absent"))))
		if err != nil || !has[0] || !has[1] || has[2] {
			t.Fatalf("HasBlobs %v, %v; want true, true, false", has, err)
		}
		got, err := r.GetBlob(ctx, ds[1], 0, -1)
		if err != nil || !bytes.Equal(got, v.Blobs[1].Data) {
			t.Fatalf("GetBlob: %d bytes, %v", len(got), err)
		}
		got, err = r.GetBlob(ctx, ds[0], 1000, 5000)
		if err != nil || !bytes.Equal(got, v.Blobs[0].Data[1000:6000]) {
			t.Fatalf("GetBlob range: %d bytes, %v", len(got), err)
		}
		got, err = r.GetBlob(ctx, ds[1], 100, -1)
		if err != nil || !bytes.Equal(got, v.Blobs[1].Data[100:]) {
			t.Fatalf("GetBlob open range: %d bytes, %v", len(got), err)
		}
	})

	t.Run("batches of small blobs", func(t *testing.T) {
		r := open(t)
		var blobs []remote.Blob
		for i := range 300 {
			data := []byte(fmt.Sprintf("small blob %d", i))
			blobs = append(blobs, remote.Blob{Digest: objects.Sum(data), Data: data})
		}
		if err := r.PutBlobs(ctx, blobs); err != nil {
			t.Fatal(err)
		}
		ds := digests(blobs)
		// Asked in another order than written.
		for i, j := 0, len(ds)-1; i < j; i, j = i+1, j-1 {
			ds[i], ds[j] = ds[j], ds[i]
		}
		got, err := r.GetBlobs(ctx, ds)
		if err != nil || len(got) != len(ds) {
			t.Fatalf("GetBlobs: %d, %v", len(got), err)
		}
		for i, d := range ds {
			if objects.Sum(got[i]) != d {
				t.Fatalf("GetBlobs[%d] is not blob %s", i, d.Short())
			}
		}
		// A small blob alone, and a range of it (a store keeps these in packs).
		one, err := r.GetBlob(ctx, blobs[7].Digest, 2, 5)
		if err != nil || !bytes.Equal(one, blobs[7].Data[2:7]) {
			t.Fatalf("GetBlob range of a small blob: %q, %v", one, err)
		}
		one, err = r.GetBlob(ctx, blobs[8].Digest, 0, -1)
		if err != nil || !bytes.Equal(one, blobs[8].Data) {
			t.Fatalf("GetBlob of a small blob: %q, %v", one, err)
		}
		_, err = r.GetBlobs(ctx, []objects.Digest{ds[0], objects.Sum([]byte("absent"))})
		wantClass(t, err, errs.NotFound, "GetBlobs with a missing blob")
	})

	t.Run("a batch over its bounds is refused", func(t *testing.T) {
		r := open(t)
		v := MakeVersion(t, 20, 5*objects.ChunkSize) // 20 MiB in five chunks
		for _, b := range v.Blobs {
			if err := r.PutBlobs(ctx, []remote.Blob{b}); err != nil {
				t.Fatal(err)
			}
		}
		_, err := r.GetBlobs(ctx, digests(v.Blobs))
		wantClass(t, err, errs.SizeLimitExceeded, "GetBlobs of 20 MiB at once")
		w := MakeVersion(t, 21, 5*objects.ChunkSize)
		wantClass(t, r.PutBlobs(ctx, w.Blobs), errs.SizeLimitExceeded, "PutBlobs of 20 MiB at once")
	})

	t.Run("upload under the wrong digest is refused", func(t *testing.T) {
		r := open(t)
		good := []byte("the bytes")
		bad := remote.Blob{Digest: objects.Sum([]byte("other bytes")), Data: good}
		err := r.PutBlobs(ctx, []remote.Blob{{Digest: objects.Sum(good), Data: good}, bad})
		wantClass(t, err, errs.IntegrityError, "PutBlobs of a blob under another digest")
		has, err := r.HasBlobs(ctx, []objects.Digest{bad.Digest})
		if err != nil || has[0] {
			t.Fatalf("the refused blob is there: %v, %v", has, err)
		}
	})

	t.Run("manifest refused while blobs are missing", func(t *testing.T) {
		r := open(t)
		v := MakeVersion(t, 2, 9<<20) // three chunks
		if err := r.PutBlobs(ctx, v.Blobs[1:2]); err != nil {
			t.Fatal(err)
		}
		_, err := r.PutManifest(ctx, v.Digest, v.Encoded)
		var missing *remote.MissingBlobsError
		if !errors.As(err, &missing) || errs.ClassOf(err) != errs.NotFound {
			t.Fatalf("PutManifest with blobs missing: %v, want a MissingBlobsError", err)
		}
		want := map[objects.Digest]bool{v.Blobs[0].Digest: true, v.Blobs[2].Digest: true}
		if len(missing.Missing) != 2 || !want[missing.Missing[0]] || !want[missing.Missing[1]] {
			t.Fatalf("missing %v, want the first and third chunks", missing.Missing)
		}
		_, err = r.GetManifest(ctx, v.Digest)
		wantClass(t, err, errs.NotFound, "GetManifest of a refused manifest")
		_, err = r.PutManifest(ctx, objects.Sum([]byte("x")), v.Encoded)
		wantClass(t, err, errs.IntegrityError, "PutManifest under another digest")
		if err := r.PutBlobs(ctx, v.Blobs); err != nil {
			t.Fatal(err)
		}
		if created, err := r.PutManifest(ctx, v.Digest, v.Encoded); err != nil || !created {
			t.Fatalf("PutManifest: created %v, %v; want created", created, err)
		}
		if created, err := r.PutManifest(ctx, v.Digest, v.Encoded); err != nil || created {
			t.Fatalf("PutManifest again: created %v, %v; want it there already", created, err)
		}
		got, err := r.GetManifest(ctx, v.Digest)
		if err != nil || !bytes.Equal(got, v.Encoded) {
			t.Fatalf("GetManifest: %v", err)
		}
	})

	t.Run("refs move by compare-and-swap", func(t *testing.T) {
		r := open(t)
		v1, v2 := small(t, r, 3), small(t, r, 4)
		_, err := r.Ref(ctx, "acme/model")
		wantClass(t, err, errs.NotFound, "Ref of a missing ref")
		if err := r.MoveRef(ctx, "acme/model", objects.Digest{}, v1.Digest, "first"); err != nil {
			t.Fatal(err)
		}
		wantClass(t, r.MoveRef(ctx, "acme/model", objects.Digest{}, v2.Digest, "again"), errs.Conflict, "create of an existing ref")
		wantClass(t, r.MoveRef(ctx, "acme/model", v2.Digest, v1.Digest, "stale"), errs.Conflict, "move from a stale value")
		if err := r.MoveRef(ctx, "acme/model", v1.Digest, v2.Digest, "second"); err != nil {
			t.Fatal(err)
		}
		info, err := r.Ref(ctx, "acme/model")
		if err != nil || info.Current != v2.Digest || len(info.History) != 2 || info.History[0] != v2.Digest || info.History[1] != v1.Digest {
			t.Fatalf("Ref after two moves: %+v, %v", info, err)
		}
		other := MakeVersion(t, 5, 10)
		wantClass(t, r.MoveRef(ctx, "acme/model", v2.Digest, other.Digest, "absent"), errs.NotFound, "move to a manifest the remote lacks")
		wantClass(t, r.MoveRef(ctx, "../evil", objects.Digest{}, v1.Digest, ""), errs.SchemaError, "move of an invalid name")
		_, err = r.Ref(ctx, "a//b")
		wantClass(t, err, errs.SchemaError, "Ref of an invalid name")
	})

	t.Run("racing moves: exactly one wins", func(t *testing.T) {
		r := open(t)
		base := small(t, r, 6)
		if err := r.MoveRef(ctx, "race", objects.Digest{}, base.Digest, ""); err != nil {
			t.Fatal(err)
		}
		var targets []Version
		for i := range 4 {
			targets = append(targets, small(t, r, uint64(10+i)))
		}
		var wg sync.WaitGroup
		results := make([]error, len(targets))
		for i, v := range targets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = r.MoveRef(ctx, "race", base.Digest, v.Digest, "racer")
			}()
		}
		wg.Wait()
		won := -1
		for i, err := range results {
			switch {
			case err == nil && won >= 0:
				t.Fatalf("racers %d and %d both won", won, i)
			case err == nil:
				won = i
			default:
				wantClass(t, err, errs.Conflict, "a losing racer")
			}
		}
		if won < 0 {
			t.Fatal("no racer won")
		}
		info, err := r.Ref(ctx, "race")
		if err != nil || info.Current != targets[won].Digest || len(info.History) != 2 {
			t.Fatalf("Ref after the race: %+v, %v; want the winner %d", info, err, won)
		}
	})

	t.Run("tags are created once", func(t *testing.T) {
		r := open(t)
		v1, v2 := small(t, r, 7), small(t, r, 8)
		_, err := r.Tag(ctx, "acme/model", "v1")
		wantClass(t, err, errs.NotFound, "Tag of a missing tag")
		created, err := r.CreateTag(ctx, "acme/model", "v1", v1.Digest)
		if err != nil || !created {
			t.Fatalf("CreateTag: %v, %v", created, err)
		}
		created, err = r.CreateTag(ctx, "acme/model", "v1", v1.Digest)
		if err != nil || created {
			t.Fatalf("CreateTag again at the same digest: %v, %v; want no change", created, err)
		}
		_, err = r.CreateTag(ctx, "acme/model", "v1", v2.Digest)
		wantClass(t, err, errs.Conflict, "CreateTag at another digest")
		d, err := r.Tag(ctx, "acme/model", "v1")
		if err != nil || d != v1.Digest {
			t.Fatalf("Tag: %s, %v", d.Short(), err)
		}
		_, err = r.CreateTag(ctx, "acme/model", "v2", MakeVersion(t, 9, 10).Digest)
		wantClass(t, err, errs.NotFound, "CreateTag at a manifest the remote lacks")
		_, err = r.CreateTag(ctx, "acme/model", "../v", v1.Digest)
		wantClass(t, err, errs.SchemaError, "CreateTag of an invalid tag")
		// A tag and a ref of one name, and names that nest, live side by side.
		if err := r.MoveRef(ctx, "acme/model/v1", objects.Digest{}, v2.Digest, ""); err != nil {
			t.Fatal(err)
		}
		if err := r.MoveRef(ctx, "acme", objects.Digest{}, v1.Digest, ""); err != nil {
			t.Fatal(err)
		}
		if d, err := r.Tag(ctx, "acme/model", "v1"); err != nil || d != v1.Digest {
			t.Fatalf("Tag beside nested refs: %s, %v", d.Short(), err)
		}
	})
}

// MakeManySmall builds a version of n small files (a model of many small
// tensors, as far as the blobs go): n blobs of a few hundred bytes.
func MakeManySmall(t testing.TB, seed uint64, n int) Version {
	t.Helper()
	var v Version
	m := &objects.Manifest{Schema: objects.ManifestSchema, Format: "opaque", Tensors: []objects.Tensor{}}
	for i := range n {
		data := []byte(fmt.Sprintf("%d/%08d %s", seed, i, bytes.Repeat([]byte{'x'}, 200+i%100)))
		d := objects.Sum(data)
		v.Blobs = append(v.Blobs, remote.Blob{Digest: d, Data: data})
		m.Files = append(m.Files, objects.File{Path: fmt.Sprintf("f%08d", i), Size: int64(len(data)), Digest: d, Role: objects.RoleOther,
			Extents: []objects.Extent{{Kind: objects.ExtentFrame, Size: int64(len(data)), Data: &objects.Data{Digest: d, Chunks: []objects.Digest{d}}}}})
	}
	d, enc, err := m.Digest()
	if err != nil {
		t.Fatal(err)
	}
	v.Digest, v.Encoded = d, enc
	return v
}

// manySmall puts many small blobs (a remote may pack them) in
// batches that overlap and mix in a large blob, then reads them back in
// another order through the other client, by batch and alone, by range;
// and the first client then sees what the second wrote after it had read.
func manySmall(t *testing.T, pair func(t *testing.T) (remote.Remote, remote.Remote)) {
	ctx := context.Background()
	a, b := pair(t)
	v, w := MakeManySmall(t, 30, 1200), MakeManySmall(t, 31, 300)
	half := len(w.Blobs) / 2
	large := MakeVersion(t, 32, 2<<20).Blobs[0]
	for i := 0; i < len(v.Blobs); i += 400 {
		if err := a.PutBlobs(ctx, v.Blobs[i:min(i+400, len(v.Blobs))]); err != nil {
			t.Fatal(err)
		}
	}
	mixed := append(append(append([]remote.Blob{}, v.Blobs[:10]...), w.Blobs[:half]...), large)
	if err := a.PutBlobs(ctx, mixed); err != nil { // ten of them there already
		t.Fatal(err)
	}
	absent := objects.Sum([]byte("absent"))
	ask := append(append(digests(v.Blobs), digests(w.Blobs)...), large.Digest, absent)
	has, err := b.HasBlobs(ctx, ask)
	if err != nil || len(has) != len(ask) {
		t.Fatalf("HasBlobs: %d answers, %v", len(has), err)
	}
	for i, ok := range has {
		want := i < len(v.Blobs)+half || i == len(ask)-2
		if ok != want {
			t.Fatalf("HasBlobs[%d] = %v, want %v", i, ok, want)
		}
	}
	// Every 7th blob of both versions, newest first, with the large one.
	var ds []objects.Digest
	var want [][]byte
	for i := len(v.Blobs) - 1; i >= 0; i -= 7 {
		ds, want = append(ds, v.Blobs[i].Digest), append(want, v.Blobs[i].Data)
	}
	for i := 0; i < half; i += 7 {
		ds, want = append(ds, w.Blobs[i].Digest), append(want, w.Blobs[i].Data)
	}
	ds, want = append(ds, large.Digest), append(want, large.Data)
	got, err := b.GetBlobs(ctx, ds)
	if err != nil || len(got) != len(ds) {
		t.Fatalf("GetBlobs: %d, %v", len(got), err)
	}
	for i := range ds {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("GetBlobs[%d] is not blob %s", i, ds[i].Short())
		}
	}
	one, err := b.GetBlob(ctx, v.Blobs[600].Digest, 3, 10)
	if err != nil || !bytes.Equal(one, v.Blobs[600].Data[3:13]) {
		t.Fatalf("GetBlob range of a small blob: %q, %v", one, err)
	}
	one, err = b.GetBlob(ctx, w.Blobs[half-1].Digest, 5, -1)
	if err != nil || !bytes.Equal(one, w.Blobs[half-1].Data[5:]) {
		t.Fatalf("GetBlob open range of a small blob: %q, %v", one, err)
	}
	_, err = b.GetBlobs(ctx, []objects.Digest{v.Blobs[0].Digest, absent})
	wantClass(t, err, errs.NotFound, "GetBlobs with a missing blob")
	if created, err := b.PutManifest(ctx, v.Digest, v.Encoded); err != nil || !created {
		t.Fatalf("PutManifest of the small blobs' version: %v, %v", created, err)
	}
	_, err = a.PutManifest(ctx, w.Digest, w.Encoded)
	var missing *remote.MissingBlobsError
	if !errors.As(err, &missing) || len(missing.Missing) != half {
		t.Fatalf("PutManifest with %d small blobs missing: %v", half, err)
	}
	// b writes the rest; a, which has read the remote before, sees them.
	if err := b.PutBlobs(ctx, w.Blobs[half:]); err != nil {
		t.Fatal(err)
	}
	has, err = a.HasBlobs(ctx, digests(w.Blobs))
	for i := 0; err == nil && i < len(has); i++ {
		if !has[i] {
			err = fmt.Errorf("blob %d missing", i)
		}
	}
	if err != nil {
		t.Fatalf("HasBlobs through the other client: %v", err)
	}
	got, err = a.GetBlobs(ctx, digests(w.Blobs[half:]))
	for i := 0; err == nil && i < len(got); i++ {
		if !bytes.Equal(got[i], w.Blobs[half+i].Data) {
			err = fmt.Errorf("blob %d differs", i)
		}
	}
	if err != nil {
		t.Fatalf("GetBlobs through the other client: %v", err)
	}
	if created, err := a.PutManifest(ctx, w.Digest, w.Encoded); err != nil || !created {
		t.Fatalf("PutManifest once every blob is there: %v, %v", created, err)
	}
}

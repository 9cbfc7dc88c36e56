package transfer

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/remote/httpremote"
	"github.com/mstore/mstore/internal/remote/pathremote"
	"github.com/mstore/mstore/internal/remote/remotetest"
	"github.com/mstore/mstore/internal/store"
)

// codedStore makes a store holding two versions of "m" as a repack leaves
// them: the first's chunk byte-grouped, the second's an XOR delta against
// the first's.
func codedStore(t *testing.T) (*store.Store, []remotetest.Version) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "served"), true, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	data := make([]byte, 1200<<10) // one chunk: kept small for -race
	for i := range data {
		data[i] = 0x3c
		if i%2 == 0 {
			data[i] = byte(r.IntN(4))
		}
	}
	tuned := bytes.Clone(data)
	for i := 0; i < len(tuned); i += 61 {
		tuned[i] ^= 1
	}
	vs := []remotetest.Version{remotetest.MakeVersionOf(t, data), remotetest.MakeVersionOf(t, tuned)}
	w := st.NewBlobWriter(nil)
	defer w.Abort()
	for i, b := range vs[1].Blobs {
		base := vs[0].Blobs[i]
		for _, c := range []struct {
			b    remote.Blob
			base []byte
		}{{base, nil}, {b, base.Data}} {
			coding, stored := store.EncodeBlob(c.b.Data, 2, c.base)
			rec := store.BlobRecord{Digest: c.b.Digest, Size: int64(len(c.b.Data)), Coding: coding}
			if c.base != nil {
				rec.Base = base.Digest
			}
			if coding != store.CodingGrouped && coding != store.CodingDelta {
				t.Fatalf("the test's blob codes %s", coding)
			}
			if _, err := w.PutStored(rec, stored); err != nil {
				t.Fatal(err)
			}
		}
	}
	recs, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(func(tx *bolt.Tx) error { return store.RecordBlobs(tx, recs) }); err != nil {
		t.Fatal(err)
	}
	pr := pathremote.New(st)
	var from objects.Digest
	for _, v := range vs {
		if _, err := pr.PutManifest(context.Background(), v.Digest, v.Encoded); err != nil {
			t.Fatal(err)
		}
		if err := pr.MoveRef(context.Background(), "m", from, v.Digest, ""); err != nil {
			t.Fatal(err)
		}
		from = v.Digest
	}
	return st, vs
}

// rawOnly is a backend that does not offer remote.Coder: a server (or a
// client) of a build before codings travelled.
type rawOnly struct{ remote.Remote }

func serveHTTP(t testing.TB, backend remote.Remote) remote.Remote {
	t.Helper()
	srv := httptest.NewServer(httpremote.NewHandler(httpremote.ServerOptions{Backend: backend, AllowPush: true, PushToken: "tok"}))
	t.Cleanup(srv.Close)
	c, err := httpremote.New(context.Background(), srv.URL, httpremote.ClientOptions{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func codings(t *testing.T, st *store.Store) map[string]int {
	t.Helper()
	u, err := st.Usage()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for k, c := range u.Codings {
		out[k] = c.Blobs
	}
	return out
}

func emptyStore(t *testing.T) *store.Store {
	st, err := store.Open(filepath.Join(t.TempDir(), "local"), true, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestCodedPullAndFallbacks pulls both versions over HTTP: coded from a
// server that offers codings (fewer bytes on the wire, kept coded here),
// raw from one that does not, and raw by a client that does not ask; the
// bytes are the same either way.
func TestCodedPullAndFallbacks(t *testing.T) {
	served, vs := codedStore(t)
	ctx := context.Background()
	for _, c := range []struct {
		what  string
		r     remote.Remote
		coded bool
	}{
		{"both ends know the codings", serveHTTP(t, pathremote.New(served)), true},
		{"a server without codings", serveHTTP(t, rawOnly{pathremote.New(served)}), false},
		{"a client without codings", rawOnly{serveHTTP(t, pathremote.New(served))}, false},
	} {
		t.Run(c.what, func(t *testing.T) {
			st := emptyStore(t)
			for _, v := range []string{"m@" + vs[0].Digest.String(), "m"} {
				res, err := Pull(ctx, st, c.r, PullOptions{Version: v})
				if err != nil {
					t.Fatal(err)
				}
				if coded := res.WireBytes < res.BytesMoved; coded != c.coded {
					t.Fatalf("pull %s: %d bytes on the wire for %d", v, res.WireBytes, res.BytesMoved)
				}
			}
			got := codings(t, st)
			if c.coded && (got["grouped"] != 1 || got["delta"] != 1) || !c.coded && (got["grouped"] != 0 || got["delta"] != 0) {
				t.Fatalf("the pulled store keeps %v", got)
			}
			requireBlobs(t, st, vs)
		})
	}
}

// requireBlobs reads every blob of vs back from st, decoded and verified.
func requireBlobs(t *testing.T, st *store.Store, vs []remotetest.Version) {
	t.Helper()
	rd := st.NewBlobReader()
	defer rd.Close()
	for _, v := range vs {
		for _, b := range v.Blobs {
			var rec store.BlobRecord
			st.View(func(tx *bolt.Tx) error {
				var ok bool
				rec, ok, _ = store.Blob(tx, b.Digest)
				if !ok {
					t.Fatalf("blob %s is not in the store", b.Digest.Short())
				}
				return nil
			})
			data, err := rd.Read(rec, nil)
			if err != nil || !bytes.Equal(data, b.Data) {
				t.Fatalf("blob %s: %v", b.Digest.Short(), err)
			}
		}
	}
}

// TestCodedPushAndFallbacks pushes both versions: coded to a server that
// takes codings (the fine-tune's deltas once their bases are there), raw
// to one that does not.
func TestCodedPushAndFallbacks(t *testing.T) {
	local, vs := codedStore(t)
	ctx := context.Background()
	for _, coded := range []bool{true, false} {
		dst := emptyStore(t)
		backend := remote.Remote(pathremote.New(dst))
		if !coded {
			backend = rawOnly{backend}
		}
		r := serveHTTP(t, backend)
		// The fine-tune first: the server lacks its deltas' bases, so
		// they go raw; then the first version (coded), then the fine-tune
		// is there already.
		res, err := Push(ctx, local, r, PushOptions{Version: "m"})
		if err != nil {
			t.Fatal(err)
		}
		if res.WireBytes != res.BytesMoved {
			t.Fatalf("push of the fine-tune with no bases there: %d bytes on the wire for %d", res.WireBytes, res.BytesMoved)
		}
		got := codings(t, dst)
		if got["delta"] != 0 {
			t.Fatalf("a delta was stored without its base: %v", got)
		}
		requireBlobs(t, dst, vs[1:])
	}
	// Bases first, then the deltas travel coded.
	dst := emptyStore(t)
	r := serveHTTP(t, pathremote.New(dst))
	first := pathremote.New(local)
	base := emptyStore(t)
	if _, err := Pull(ctx, base, first, PullOptions{Version: "m@" + vs[0].Digest.String(), As: "b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Push(ctx, base, r, PushOptions{Version: "b"}); err != nil {
		t.Fatal(err)
	}
	res, err := Push(ctx, local, r, PushOptions{Version: "m"})
	if err != nil || res.WireBytes >= res.BytesMoved {
		t.Fatalf("push of the fine-tune against bases there: %+v, %v", res, err)
	}
	if got := codings(t, dst); got["delta"] != 1 || got["grouped"] != 1 {
		t.Fatalf("the pushed-to store keeps %v", got)
	}
	requireBlobs(t, dst, vs)
}

// lyingCoder alters one byte of every coded blob it sends.
type lyingCoder struct{ *httpremote.Client }

func (l lyingCoder) GetCoded(ctx context.Context, ds []objects.Digest, accept []string) ([]remote.CodedBlob, error) {
	bs, err := l.Client.GetCoded(ctx, ds, accept)
	for i := range bs {
		if len(bs[i].Data) == 0 {
			continue
		}
		bs[i].Data = bytes.Clone(bs[i].Data)
		bs[i].Data[len(bs[i].Data)/2] ^= 1
	}
	return bs, err
}

// GetCodedInto alters as GetCoded does: a pull reads large blobs so.
func (l lyingCoder) GetCodedInto(ctx context.Context, d objects.Digest, accept []string, buf []byte) (remote.CodedBlob, error) {
	b, err := l.Client.GetCodedInto(ctx, d, accept, buf)
	if len(b.Data) > 0 {
		b.Data[len(b.Data)/2] ^= 1
	}
	return b, err
}

// TestCodedPullVerifies: a coded blob that does not decode to its digest
// is an integrity_error, and nothing of the version is recorded.
func TestCodedPullVerifies(t *testing.T) {
	served, vs := codedStore(t)
	r := lyingCoder{serveHTTP(t, pathremote.New(served)).(*httpremote.Client)}
	st := emptyStore(t)
	_, err := Pull(context.Background(), st, r, PullOptions{Version: "m@" + vs[0].Digest.String()})
	if errs.ClassOf(err) != errs.IntegrityError {
		t.Fatalf("pull of altered coded bytes: %v, want integrity_error", err)
	}
	if got := codings(t, st); len(got) != 0 {
		t.Fatalf("a refused pull left %v", got)
	}
}

package remotetest

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/store"
)

// weightsLike is n bytes that byte-group well, as BF16 weights do.
func weightsLike(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = 0x3c
		if i%2 == 0 {
			b[i] = byte(r.IntN(4))
		}
	}
	return b
}

// coderCases runs when the remote offers remote.Coder: a grouped blob is
// taken and read back (raw, or as stored); one that does not decode to its
// digest, or claims another size, is an integrity_error and stores
// nothing; a delta whose base the remote lacks comes back to be sent raw,
// and is taken coded once the base is there.
func coderCases(t *testing.T, r remote.Remote) {
	c, ok := r.(remote.Coder)
	if !ok || len(c.Codings()) == 0 {
		return
	}
	ctx := context.Background()
	base, tuned := weightsLike(1, 300_000), weightsLike(1, 300_000)
	for i := 0; i < len(tuned); i += 97 {
		tuned[i] ^= 1
	}
	bd, td := objects.Sum(base), objects.Sum(tuned)
	coding, grouped := store.EncodeBlob(base, 2, nil)
	if coding != store.CodingGrouped {
		t.Fatalf("the case's blob codes %s", coding)
	}
	coding, delta := store.EncodeBlob(tuned, 2, base)
	if coding != store.CodingDelta {
		t.Fatalf("the case's fine-tune codes %s", coding)
	}
	bad := bytes.Clone(grouped)
	bad[len(bad)/2] ^= 0x55
	for _, b := range []remote.CodedBlob{
		{Digest: bd, Size: int64(len(base)), Coding: remote.CodingGrouped, Data: bad},
		{Digest: bd, Size: int64(len(base)) + 1, Coding: remote.CodingGrouped, Data: grouped},
		{Digest: objects.Sum([]byte("x")), Size: int64(len(base)), Coding: remote.CodingGrouped, Data: grouped},
	} {
		_, err := c.PutCoded(ctx, []remote.CodedBlob{b})
		wantClass(t, err, errs.IntegrityError, "PutCoded of bytes that do not decode to the blob")
	}
	if has, err := r.HasBlobs(ctx, []objects.Digest{bd}); err != nil || has[0] {
		t.Fatalf("a refused coded blob is there: %v, %v", has, err)
	}
	dt := remote.CodedBlob{Digest: td, Size: int64(len(tuned)), Coding: remote.CodingDelta, Base: bd, Data: delta}
	raw, err := c.PutCoded(ctx, []remote.CodedBlob{dt})
	if err != nil || len(raw) != 1 || raw[0] != td {
		t.Fatalf("PutCoded of a delta whose base is absent: %v, %v; want it back, to send raw", raw, err)
	}
	if has, err := r.HasBlobs(ctx, []objects.Digest{td}); err != nil || has[0] {
		t.Fatalf("a delta without its base was stored: %v, %v", has, err)
	}
	if raw, err := c.PutCoded(ctx, []remote.CodedBlob{{Digest: bd, Size: int64(len(base)), Coding: remote.CodingGrouped, Data: grouped}}); err != nil || len(raw) != 0 {
		t.Fatalf("PutCoded of a grouped blob: %v, %v", raw, err)
	}
	if raw, err := c.PutCoded(ctx, []remote.CodedBlob{dt}); err != nil || len(raw) != 0 {
		t.Fatalf("PutCoded of a delta against a base there: %v, %v", raw, err)
	}
	for _, accept := range [][]string{nil, c.Codings()} {
		got, err := c.GetCoded(ctx, []objects.Digest{bd, td}, accept)
		if err != nil || len(got) != 2 {
			t.Fatalf("GetCoded accepting %v: %d, %v", accept, len(got), err)
		}
		for i, want := range [][]byte{base, tuned} {
			g := got[i]
			switch {
			case g.Size != int64(len(want)):
				t.Fatalf("GetCoded accepting %v: blob %d has raw size %d", accept, i, g.Size)
			case g.Coding == remote.CodingRaw && !bytes.Equal(g.Data, want):
				t.Fatalf("GetCoded accepting %v: blob %d's raw bytes differ", accept, i)
			case g.Coding != remote.CodingRaw && (len(accept) == 0 || len(g.Data) >= len(want)):
				t.Fatalf("GetCoded accepting %v: blob %d came %s in %d bytes", accept, i, g.Coding, len(g.Data))
			}
		}
	}
	if ci, ok := r.(remote.CoderInto); ok {
		intoCases(t, c, ci, []objects.Digest{bd, td})
	}
	one, err := r.GetBlob(ctx, td, 10, 20)
	if err != nil || !bytes.Equal(one, tuned[10:30]) {
		t.Fatalf("GetBlob of a delta-coded blob: %v", err)
	}
}

// intoCases: GetCodedInto gives what GetCoded gives, in the buffer handed
// to it when that holds the bytes, and whole when it does not.
func intoCases(t *testing.T, c remote.Coder, ci remote.CoderInto, ds []objects.Digest) {
	ctx := context.Background()
	for _, accept := range [][]string{nil, c.Codings(), {remote.CodingRaw}} {
		for _, d := range ds {
			want, err := c.GetCoded(ctx, []objects.Digest{d}, accept)
			if err != nil {
				t.Fatal(err)
			}
			for _, size := range []int{10, objects.ChunkSize} {
				buf := make([]byte, size)
				for i := range buf {
					buf[i] = 0xee
				}
				got, err := ci.GetCodedInto(ctx, d, accept, buf)
				w := want[0]
				switch {
				case err != nil:
					t.Fatalf("GetCodedInto accepting %v: %v", accept, err)
				case got.Digest != w.Digest || got.Size != w.Size || got.Coding != w.Coding || got.Base != w.Base || !bytes.Equal(got.Data, w.Data):
					t.Fatalf("GetCodedInto accepting %v into %d bytes: %s %d %s, %d bytes; GetCoded gives %s %d %s, %d bytes", accept, size, got.Digest.Short(), got.Size, got.Coding, len(got.Data), w.Digest.Short(), w.Size, w.Coding, len(w.Data))
				case len(accept) > 0 && len(got.Data) <= size && &got.Data[0] != &buf[0]:
					t.Fatalf("GetCodedInto accepting %v: %d bytes not read into the buffer of %d given", accept, len(got.Data), size)
				}
			}
		}
	}
}

package journal

import (
	"cmp"
	"encoding/base64"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mstore/mstore/internal/objects"
)

// members makes n members of a pack, out of offset order, with gaps.
func members(n int) []PackMember {
	out := make([]PackMember, n)
	var off int64
	for i := range out {
		size := int64(1 + i%700*1000)
		out[i] = PackMember{Digest: objects.Sum([]byte{byte(i), byte(i >> 8), byte(i >> 16)}), Offset: off, Size: size}
		off += size + int64(i%3) // a gap now and then
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// Packrun records come back from Read as the OpPacked records they stand
// for, each member once with its digest, offset and size, beside per-blob
// lines of older journals in the same file; a long run takes several lines.
func TestPackRunsReadBackAsPacked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	const pack = "00112233445566778899aabbccddeeff"
	ms := members(2*packRunMax + 5)
	want := map[objects.Digest]PackMember{}
	for _, m := range ms {
		want[m.Digest] = m
	}
	old := Record{Op: OpPacked, Digest: objects.Sum([]byte("old")), Pack: pack, Offset: 7, Size: 9}
	runs := PackRuns(pack, slices.Clone(ms))
	if len(runs) != 3 {
		t.Fatalf("%d members in %d records, want 3", len(ms), len(runs))
	}
	if err := Append(path, 1, []Record{old}); err != nil {
		t.Fatal(err)
	}
	if err := Append(path, 2, append(runs, rec("after"))); err != nil {
		t.Fatal(err)
	}
	l := mustRead(t, path)
	if len(l.Batches) != 2 || l.BadLines+l.Damaged+l.Incomplete != 0 {
		t.Fatalf("read %+v", l)
	}
	old.Batch = 1
	if got := l.Batches[0].Records; len(got) != 1 || got[0] != old {
		t.Fatalf("the per-blob line of an older build reads as %+v", got)
	}
	got := l.Batches[1].Records
	if len(got) != len(ms)+1 || got[len(got)-1].Name != "after" {
		t.Fatalf("%d records, want %d members and the move after them", len(got), len(ms))
	}
	for _, r := range got[:len(ms)] {
		m, ok := want[r.Digest]
		if !ok || r != (Record{Op: OpPacked, Batch: 2, Digest: m.Digest, Pack: pack, Offset: m.Offset, Size: m.Size}) {
			t.Fatalf("member read back as %+v, written as %+v", r, m)
		}
		delete(want, r.Digest)
	}
	if len(want) != 0 {
		t.Fatalf("%d members did not come back", len(want))
	}
	if info, _ := os.Stat(path); info.Size() > int64(len(ms))*60 {
		t.Errorf("the journal is %d bytes for %d members", info.Size(), len(ms))
	}
}

// Members that do not decode, behind a good checksum, make the line bad:
// the batch holding it is damaged, not read short.
func TestBadPackRunDamagesItsBatch(t *testing.T) {
	good := PackRuns("aa", members(3))[0]
	raw, _ := base64.StdEncoding.DecodeString(good.Members)
	huge := append(slices.Clone(raw[:32]), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1) // offset 2^62
	back := append(slices.Clone(raw[:32]), 0x01, 4)                                                 // offset −1
	cases := map[string]Record{
		"not base64":    {Op: OpPackRun, Pack: "aa", Members: "!!"},
		"cut digest":    {Op: OpPackRun, Pack: "aa", Members: base64.StdEncoding.EncodeToString(raw[:20])},
		"cut size":      {Op: OpPackRun, Pack: "aa", Members: base64.StdEncoding.EncodeToString(raw[:33])},
		"huge offset":   {Op: OpPackRun, Pack: "aa", Members: base64.StdEncoding.EncodeToString(huge)},
		"before zero":   {Op: OpPackRun, Pack: "aa", Members: base64.StdEncoding.EncodeToString(back)},
		"no pack":       {Op: OpPackRun, Members: good.Members},
		"digest beside": {Op: OpPackRun, Pack: "aa", Members: good.Members, Digest: objects.Sum(nil)},
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal")
			if err := Append(path, 1, []Record{rec("a")}); err != nil {
				t.Fatal(err)
			}
			if err := Append(path, 2, []Record{good, r}); err != nil {
				t.Fatal(err)
			}
			l := mustRead(t, path)
			if len(l.Batches) != 1 || l.Batches[0].Seq != 1 || l.Damaged != 1 || l.BadLines != 1 {
				t.Fatalf("read %+v", l)
			}
		})
	}
}

func FuzzPackRun(f *testing.F) {
	for _, r := range PackRuns("aa", members(5)) {
		b, _ := base64.StdEncoding.DecodeString(r.Members)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := Record{Op: OpPackRun, Pack: "aa", Members: base64.StdEncoding.EncodeToString(b)}
		got, ok := expandPackRun(r)
		if packRunDecodes(r) != ok { // Check's path, which makes no records
			t.Fatalf("packRunDecodes = %v, expandPackRun's ok = %v", !ok, ok)
		}
		if !ok {
			return
		}
		// What decodes is in range, and reads back the same once written.
		var ms []PackMember
		for _, m := range got {
			if m.Offset < 0 || m.Size < 0 || m.Offset > packRunBound || m.Size > packRunBound {
				t.Fatalf("member out of range: %+v", m)
			}
			ms = append(ms, PackMember{Digest: m.Digest, Offset: m.Offset, Size: m.Size})
		}
		var back []Record
		for _, r := range PackRuns("aa", slices.Clone(ms)) {
			rs, ok := expandPackRun(r)
			if !ok {
				t.Fatalf("members %+v written as %q do not read back", ms, r.Members)
			}
			back = append(back, rs...)
		}
		if len(back) != len(got) {
			t.Fatalf("%d members read back as %d", len(got), len(back))
		}
		slices.SortStableFunc(ms, func(a, b PackMember) int { return cmp.Compare(a.Offset, b.Offset) })
		for i, r := range back {
			if r.Digest != ms[i].Digest || r.Offset != ms[i].Offset || r.Size != ms[i].Size {
				t.Fatalf("member %d: %+v read back as %+v", i, ms[i], r)
			}
		}
	})
}

// byOffset orders members as a stable sort by offset does, with offsets
// that fit its integer keys and with offsets past them (the fallback).
func TestByOffset(t *testing.T) {
	for _, base := range []int64{0, 1 << 45} {
		ms := members(3000)
		for i := range ms {
			ms[i].Offset += base
			if i%10 == 0 {
				ms[i].Offset = ms[i/2].Offset // ties, kept in the order given
			}
		}
		want := slices.Clone(ms)
		slices.SortStableFunc(want, func(a, b PackMember) int { return cmp.Compare(a.Offset, b.Offset) })
		for j, i := range byOffset(ms) {
			if ms[i] != want[j] {
				t.Fatalf("offsets from %d: place %d holds %+v, want %+v", base, j, ms[i], want[j])
			}
		}
	}
}

package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/journal"
	"github.com/mstore/mstore/internal/objects"
)

// weights returns n bytes of BF16 values ~N(0, scale), with NaN payloads,
// infinities, denormals and -0 mixed in.
func weights(seed uint64, n int, scale float64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	special := []uint16{0x7fc1, 0xffa5, 0x7f80, 0xff80, 0x0001, 0x807f, 0x8000}
	b := make([]byte, n)
	for i := 0; i+1 < n; i += 2 {
		v := uint16(math.Float32bits(float32(r.NormFloat64()*scale)) >> 16)
		if r.IntN(100) == 0 {
			v = special[r.IntN(len(special))]
		}
		binary.LittleEndian.PutUint16(b[i:], v)
	}
	if n%2 == 1 {
		b[n-1] = 0x5a
	}
	return b
}

// fineTune flips low mantissa bits of some elements, as a small update does.
func fineTune(base []byte, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 9))
	out := bytes.Clone(base)
	for i := 0; i+1 < len(out); i += 2 {
		if r.IntN(3) == 0 {
			out[i] ^= byte(r.IntN(4))
		}
	}
	return out
}

func fill(b []byte, seed uint64) {
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)}).Read(b)
}

// putCoded stores data coded against base (nil for none) and records it.
func putCoded(t testing.TB, st *Store, data []byte, width int, base []byte) BlobRecord {
	t.Helper()
	coding, stored := EncodeBlob(data, width, base)
	rec := BlobRecord{Digest: objects.Sum(data), Size: int64(len(data)), Coding: coding}
	if coding == CodingDelta {
		rec.Base = objects.Sum(base)
	}
	if coding == CodingRaw {
		stored = data
	}
	w := st.NewBlobWriter(nil)
	if _, err := w.PutStored(rec, stored); err != nil {
		t.Fatal(err)
	}
	recs, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, recs) }); err != nil {
		t.Fatal(err)
	}
	return lookup(t, st, rec.Digest)
}

func lookup(t testing.TB, st *Store, d objects.Digest) BlobRecord {
	t.Helper()
	var rec BlobRecord
	err := st.View(func(tx *bolt.Tx) error {
		r, ok, err := Blob(tx, d)
		if !ok && err == nil {
			err = errors.New("not recorded")
		}
		rec = r
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func readBlob(st *Store, rec BlobRecord) ([]byte, error) {
	r := st.NewBlobReader()
	defer r.Close()
	return r.Read(rec, nil)
}

// Every coding read back through the store is the raw bytes, bit for bit:
// random and adversarial data, odd lengths, short last chunks, bases
// shorter or longer than the target.
func TestCodedBlobsRoundTripProperty(t *testing.T) {
	st := newStore(t)
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 300<<10).Draw(rt, "len")
		seed := rapid.Uint64().Draw(rt, "seed")
		var data []byte
		switch rapid.IntRange(0, 2).Draw(rt, "kind") {
		case 0:
			data = weights(seed, n, 0.02)
		case 1:
			data = make([]byte, n) // all zero
			data[n-1] = byte(seed) // distinct blobs
		case 2:
			data = make([]byte, n)
			fill(data, seed) // incompressible
		}
		var base []byte
		if rapid.Bool().Draw(rt, "delta") {
			base = weights(seed+1, rapid.IntRange(1, n).Draw(rt, "base_len"), 0.02)
			if rapid.Bool().Draw(rt, "near") {
				base = fineTune(data, seed)
			}
			putCoded(t, st, base, 2, nil)
		}
		rec := putCoded(t, st, data, rapid.SampledFrom([]int{1, 2, 4}).Draw(rt, "width"), base)
		got, err := readBlob(st, rec)
		if err != nil {
			rt.Fatalf("read %s blob: %v", rec.Coding, err)
		}
		if !bytes.Equal(got, data) {
			rt.Fatalf("%s blob read back differs", rec.Coding)
		}
	})
}

func TestCodingsShrinkWeightsAndDeltas(t *testing.T) {
	st := newStore(t)
	base := weights(1, 4<<20, 0.02)
	ft := fineTune(base, 2)
	b := putCoded(t, st, base, 2, nil)
	d := putCoded(t, st, ft, 2, base)
	if b.Coding != CodingGrouped || float64(b.Stored)/float64(b.Size) > 0.8 {
		t.Fatalf("BF16 base: %s at %d of %d bytes, want grouped at <= 0.8", b.Coding, b.Stored, b.Size)
	}
	if d.Coding != CodingDelta || d.Base != b.Digest || float64(d.Stored)/float64(d.Size) > 0.4 {
		t.Fatalf("fine-tune: %s at %d of %d bytes, want a delta against the base at <= 0.4", d.Coding, d.Stored, d.Size)
	}
	if d.BaseRec == nil || d.BaseRec.Digest != b.Digest {
		t.Fatalf("Blob did not attach the base's record")
	}
	noise := make([]byte, 2<<20)
	fill(noise, 3)
	if coding, _ := EncodeBlob(noise, 1, nil); coding != CodingRaw {
		t.Fatalf("incompressible bytes coded as %s, want raw", coding)
	}
}

// A record from before codings (no trailer) reads as raw; a coded record
// round-trips; a bad trailer is an integrity_error.
func TestCodingRecordCompat(t *testing.T) {
	d := objects.Sum([]byte("x"))
	legacy := append([]byte{byte(EncodingRaw)}, u64(5)...)
	r, err := decodeBlobRecord(d, legacy)
	if err != nil || r.Coded() || r.Coding.String() != "raw" || r.StoredSize() != 5 {
		t.Fatalf("legacy record = %+v, %v", r, err)
	}
	legacyPacked := append(append(append([]byte{byte(EncodingPacked)}, u64(5)...), make([]byte, 16)...), u64(7)...)
	if r, err := decodeBlobRecord(d, legacyPacked); err != nil || r.Coded() || r.Offset != 7 {
		t.Fatalf("legacy packed record = %+v, %v", r, err)
	}
	for _, rec := range []BlobRecord{
		{Digest: d, Size: 100, Encoding: EncodingPacked, Offset: 3, Coding: CodingGrouped, Stored: 60},
		{Digest: d, Size: 100, Encoding: EncodingPacked, Offset: 3, Coding: CodingDelta, Stored: 20, Base: objects.Sum([]byte("b"))},
	} {
		got, err := decodeBlobRecord(d, encodeBlobRecord(rec))
		if err != nil || got != rec {
			t.Fatalf("round trip of %+v = %+v, %v", rec, got, err)
		}
	}
	for name, b := range map[string][]byte{
		"coded loose":      append(append([]byte{byte(EncodingRaw)}, u64(100)...), append([]byte{byte(CodingGrouped)}, u64(50)...)...),
		"stored >= size":   encodeBlobRecord(BlobRecord{Size: 10, Encoding: EncodingPacked, Coding: CodingGrouped, Stored: 10}),
		"unknown coding":   append(legacyPacked, append([]byte{9}, u64(3)...)...),
		"truncated base":   encodeBlobRecord(BlobRecord{Size: 10, Encoding: EncodingPacked, Coding: CodingDelta, Stored: 3})[:50],
		"trailing garbage": append(encodeBlobRecord(BlobRecord{Size: 10, Encoding: EncodingPacked, Coding: CodingGrouped, Stored: 3}), 1),
	} {
		if _, err := decodeBlobRecord(d, b); !errors.Is(err, errs.IntegrityError) {
			t.Errorf("%s: err = %v, want integrity_error", name, err)
		}
	}
}

// A corrupt coded blob, a delta whose base is gone or is a delta: each read
// is an integrity_error, and fsck reports the blob corrupt.
func TestCorruptCodedBlobIsIntegrityError(t *testing.T) {
	st := newStore(t)
	base := weights(4, 1<<20+17, 0.02)
	b := putCoded(t, st, base, 2, nil)
	d := putCoded(t, st, fineTune(base, 5), 2, base)
	if d.Coding != CodingDelta {
		t.Fatalf("coding %s, want delta", d.Coding)
	}
	f, err := os.OpenFile(st.PackPath(d.Pack), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{d.Offset + 6, d.Offset + d.Stored/2, d.Offset + d.Stored - 1} {
		buf := []byte{0}
		f.ReadAt(buf, off)
		buf[0] ^= 0x41
		f.WriteAt(buf, off)
	}
	f.Close()
	if _, err := readBlob(st, d); !errors.Is(err, errs.IntegrityError) {
		t.Fatalf("corrupt delta: err = %v, want integrity_error", err)
	}
	rep, err := st.Fsck(context.Background(), FsckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || len(rep.Corrupt) != 1 || rep.Corrupt[0].ID != d.Digest.String() {
		t.Fatalf("fsck corrupt = %+v, want the delta", rep.Corrupt)
	}
	if got, err := readBlob(st, b); err != nil || !bytes.Equal(got, base) {
		t.Fatalf("the base still reads: %v", err)
	}

	orphan := d
	orphan.BaseRec = nil
	if _, err := readBlob(st, orphan); !errors.Is(err, errs.IntegrityError) {
		t.Fatalf("delta without its base record: err = %v, want integrity_error", err)
	}
	chain := d
	chain.BaseRec = &BlobRecord{Digest: d.Base, Coding: CodingDelta}
	if _, err := readBlob(st, chain); !errors.Is(err, errs.IntegrityError) {
		t.Fatalf("delta against a delta: err = %v, want integrity_error", err)
	}
}

// `fsck --rebuild-index` finds coded blobs from the journal, decodes each
// (a delta with its base) and records them as they were.
func TestRebuildKeepsCodedBlobs(t *testing.T) {
	st := newStore(t)
	base := weights(6, 2<<20, 0.02)
	ft := fineTune(base, 7)
	b := putCoded(t, st, base, 2, nil)
	d := putCoded(t, st, ft, 2, base)
	if b.Coding != CodingGrouped || d.Coding != CodingDelta {
		t.Fatalf("codings %s, %s", b.Coding, d.Coding)
	}
	if err := os.Remove(filepath.Join(st.Dir(), indexFile)); err != nil {
		t.Fatal(err)
	}
	rep, err := RebuildIndex(context.Background(), st.Dir(), Options{Names: noNames{}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Packed != 2 {
		t.Fatalf("rebuild = %+v", rep)
	}
	for data, want := range map[*[]byte]BlobRecord{&base: b, &ft: d} {
		got := lookup(t, st, want.Digest)
		got.BaseRec, want.BaseRec = nil, nil
		if got != want {
			t.Fatalf("rebuilt record %+v, want %+v", got, want)
		}
		out, err := readBlob(st, lookup(t, st, want.Digest))
		if err != nil || !bytes.Equal(out, *data) {
			t.Fatalf("read after rebuild: %v", err)
		}
	}
}

func TestUsageReportsCodings(t *testing.T) {
	st := newStore(t)
	base := weights(8, 1<<20, 0.02)
	putCoded(t, st, base, 2, nil)
	putCoded(t, st, fineTune(base, 9), 2, base)
	commit(t, st, small)
	u, err := st.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if u.UniqueRawBytes != 2<<20+int64(len(small)) || u.StoredBlobBytes >= u.UniqueRawBytes {
		t.Fatalf("usage %+v", u)
	}
	for _, c := range []string{"raw", "grouped", "delta"} {
		if s := u.Codings[c]; s == nil || s.Blobs != 1 || s.Ratio <= 0 || c != "raw" && s.Ratio >= 1 {
			t.Fatalf("coding %s: %+v", c, s)
		}
	}
}

// FuzzDecodeBlob: whatever the stored bytes, decoding is the blob's raw
// length or an integrity_error, never a panic, and allocates by the record.
func FuzzDecodeBlob(f *testing.F) {
	base := weights(10, 3000, 0.02)
	f.Add(EncodeBlobBytes(base, 2, nil), false)
	f.Add(EncodeBlobBytes(fineTune(base, 11), 2, base), true)
	f.Fuzz(func(t *testing.T, stored []byte, delta bool) {
		rec := BlobRecord{Digest: objects.Sum(base), Size: int64(len(base)), Coding: CodingGrouped}
		var b []byte
		if delta {
			rec.Coding, b = CodingDelta, base
		}
		out, err := decodeBlob(rec, stored, b, nil)
		if err != nil {
			if !errors.Is(err, errs.IntegrityError) {
				t.Fatalf("error %v is not an integrity_error", err)
			}
			return
		}
		if len(out) != len(base) {
			t.Fatalf("decoded %d bytes, want %d", len(out), len(base))
		}
	})
}

// EncodeBlobBytes is EncodeBlob's coded bytes (the raw bytes when raw wins).
func EncodeBlobBytes(raw []byte, width int, base []byte) []byte {
	if _, b := EncodeBlob(raw, width, base); b != nil {
		return b
	}
	return raw
}

// CheckStored accepts coded bytes that decode to the blob (a delta with
// this store's base) and refuses others as integrity_error.
func TestCheckStored(t *testing.T) {
	st := newStore(t)
	base := weights(12, 1<<20, 0.02)
	b := putCoded(t, st, base, 2, nil)
	ft := fineTune(base, 13)
	coding, stored := EncodeBlob(ft, 2, base)
	rec := BlobRecord{Digest: objects.Sum(ft), Size: int64(len(ft)), Coding: coding, Base: b.Digest, Stored: int64(len(stored)), BaseRec: &b}
	r := st.NewBlobReader()
	defer r.Close()
	if err := r.CheckStored(rec, stored); coding != CodingDelta || err != nil {
		t.Fatalf("good delta (%s): %v", coding, err)
	}
	bad := bytes.Clone(stored)
	bad[len(bad)/2] ^= 0x20
	if err := r.CheckStored(rec, bad); !errors.Is(err, errs.IntegrityError) {
		t.Fatalf("flipped delta: %v, want integrity_error", err)
	}
	other := rec
	other.Digest = objects.Sum(base)
	if err := r.CheckStored(other, stored); !errors.Is(err, errs.IntegrityError) {
		t.Fatalf("delta under another digest: %v, want integrity_error", err)
	}
}

// noNames is a names layer with no names: the blob records alone are
// rebuilt (this package cannot import refs).
type noNames struct{}

func (noNames) Check(*bolt.Tx) error { return nil }
func (noNames) EachName(*bolt.Tx, func(kind, name string, d objects.Digest, what string)) (int, int, []error) {
	return 0, 0, nil
}
func (noNames) Referenced(*bolt.Tx) (map[objects.Digest]bool, error) { return nil, nil }
func (noNames) Replay(*bolt.Tx, *journal.Log, func(string, ...any))  {}

// CheckDecodes accepts a coding that gives its raw bytes back, grouped or
// delta, and refuses with integrity_error one that does not decode and one
// that decodes to other bytes.
func TestCheckDecodes(t *testing.T) {
	base := weights(21, 1<<20, 0.02)
	ft := fineTune(base, 22)
	gc, grouped := EncodeBlob(base, 2, nil)
	dc, delta := EncodeBlob(ft, 2, base)
	if gc != CodingGrouped || dc != CodingDelta {
		t.Fatalf("codings %s, %s: want grouped and delta", gc, dc)
	}
	g := BlobRecord{Digest: objects.Sum(base), Size: int64(len(base)), Coding: gc}
	d := BlobRecord{Digest: objects.Sum(ft), Size: int64(len(ft)), Coding: dc, Base: g.Digest}
	buf, err := CheckDecodes(g, grouped, base, nil, nil)
	if err != nil {
		t.Fatalf("grouped: %v", err)
	}
	if _, err := CheckDecodes(d, delta, ft, base, buf); err != nil {
		t.Fatalf("delta: %v", err)
	}
	bad := bytes.Clone(grouped)
	bad[len(bad)/2] ^= 0x20
	other := fineTune(base, 23) // the delta decodes, to other bytes than these
	for name, err := range map[string]error{
		"a flipped byte":       func() error { _, err := CheckDecodes(g, bad, base, nil, nil); return err }(),
		"grouped, other bytes": func() error { _, err := CheckDecodes(g, grouped, ft, nil, nil); return err }(),
		"another blob's bytes": func() error { _, err := CheckDecodes(d, delta, other, base, nil); return err }(),
		"the wrong base":       func() error { _, err := CheckDecodes(d, delta, ft, other, nil); return err }(),
	} {
		if !errors.Is(err, errs.IntegrityError) {
			t.Errorf("%s: %v, want integrity_error", name, err)
		}
	}
}

// A blob larger than a chunk (only a manifest's can be) is never coded:
// its planes would be past what the decoder takes. One chunk of the same
// bytes codes, and decodes.
func TestBlobsPastAChunkStayRaw(t *testing.T) {
	manifestLike := bytes.Repeat([]byte(`{"name":"model.layers.0.weight","dtype":"F32","digest":"db76436accf473e1c714a4"},`), objects.ChunkSize/80+100)
	if len(manifestLike) <= objects.ChunkSize {
		t.Fatalf("test blob of %d bytes, want more than a chunk", len(manifestLike))
	}
	if coding, stored := EncodeBlob(manifestLike, 1, nil); coding != CodingRaw || stored != nil {
		t.Fatalf("a blob of %d bytes coded as %s (%d bytes), want raw", len(manifestLike), coding, len(stored))
	}
	if coding, _ := EncodeBlob(manifestLike, 1, manifestLike); coding != CodingRaw {
		t.Fatalf("a blob of %d bytes coded as %s against a base, want raw", len(manifestLike), coding)
	}
	chunk := manifestLike[:objects.ChunkSize]
	coding, stored := EncodeBlob(chunk, 1, nil)
	if coding != CodingGrouped {
		t.Fatalf("a chunk of the same bytes coded as %s, want grouped", coding)
	}
	rec := BlobRecord{Digest: objects.Sum(chunk), Size: int64(len(chunk)), Coding: coding, Stored: int64(len(stored))}
	if _, err := CheckDecodes(rec, stored, chunk, nil, nil); err != nil {
		t.Fatal(err)
	}
}

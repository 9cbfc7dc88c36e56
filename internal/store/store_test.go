package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/journal"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
)

func newStore(t testing.TB) *Store {
	t.Helper()
	st, err := Open(filepath.Join(t.TempDir(), "store"), true, Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestOpenMissingStoreIsNotFound(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "nothing"), false, Options{})
	if !errors.Is(err, errs.NotFound) {
		t.Fatalf("err = %v, want not_found", err)
	}
}

func TestOpenRefusesOtherFormatVersion(t *testing.T) {
	for _, v := range []uint64{0, FormatVersion + 1, 99} {
		st := newStore(t)
		err := st.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyFormat, u64(v)) })
		if err != nil {
			t.Fatal(err)
		}
		_, err = Open(st.Dir(), false, Options{})
		if !errors.Is(err, errs.UnsupportedVersion) {
			t.Fatalf("format %d: err = %v, want unsupported_version", v, err)
		}
		if newer := strings.Contains(err.Error(), "newer mstore"); newer != (v > FormatVersion) {
			t.Errorf("format %d: %v", v, err)
		}
	}
}

// A store of format 1 (before manifest stubs) opens, and keeps its
// manifests' bytes in its index: the builds that made it read them there.
// A new store is of format 2, and keeps a stub.
func TestFormatOneStoreKeepsManifestBytes(t *testing.T) {
	put := func(st *Store) []byte {
		t.Helper()
		m := &objects.Manifest{Schema: objects.ManifestSchema, Format: "safetensors", Files: []objects.File{}, Tensors: []objects.Tensor{}}
		d, enc, err := m.Digest()
		if err != nil {
			t.Fatal(err)
		}
		recs, err := st.WriteManifestBlob(d, enc)
		if err != nil {
			t.Fatal(err)
		}
		var v []byte
		err = st.Update(func(tx *bolt.Tx) error {
			if err := RecordBlobs(tx, recs); err != nil {
				return err
			}
			if err := PutManifest(tx, d, enc); err != nil {
				return err
			}
			v = bytes.Clone(tx.Bucket(bucketManifests).Get(d[:]))
			got, err := st.ManifestBytes(tx, d)
			if err == nil && !bytes.Equal(got, enc) {
				t.Errorf("ManifestBytes = %q, want %q", got, enc)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	format := func(st *Store) (v uint64) {
		st.View(func(tx *bolt.Tx) error { v = getU64(tx.Bucket(bucketMeta).Get(keyFormat)); return nil })
		return v
	}

	fresh := newStore(t)
	if v := format(fresh); v != 2 {
		t.Fatalf("a new store is of format %d, want 2", v)
	}
	if _, _, ok := stub(put(fresh)); !ok {
		t.Fatal("a new store keeps a manifest's bytes in its index, want a stub")
	}

	old := newStore(t)
	if err := old.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyFormat, u64(1)) }); err != nil {
		t.Fatal(err)
	}
	reopened, err := Open(old.Dir(), false, Options{})
	if err != nil {
		t.Fatalf("a store of format 1: %v", err)
	}
	if v := put(reopened); len(v) == 0 || v[0] != '{' {
		t.Fatalf("a store of format 1 keeps %q in its index, want the manifest's bytes", v)
	}
	if v := format(reopened); v != 1 {
		t.Fatalf("a store of format 1 became format %d", v)
	}
}

// commit writes blobs in one batch and records them.
func commit(t *testing.T, st *Store, blobs ...[]byte) []BlobRecord {
	t.Helper()
	w := st.NewBlobWriter(nil)
	for _, b := range blobs {
		if _, err := w.Put(objects.Sum(b), b); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, recs) }); err != nil {
		t.Fatal(err)
	}
	return recs
}

var (
	small = []byte("a small tensor: packed")
	large = bytes.Repeat([]byte("a large chunk: one file. "), PackThreshold/16)
)

func TestBlobWriterCommitsDurableFilesAndDedups(t *testing.T) {
	st := newStore(t)
	w := st.NewBlobWriter(nil)
	for _, data := range [][]byte{small, large} {
		d := objects.Sum(data)
		if wrote, err := w.Put(d, data); err != nil || !wrote {
			t.Fatalf("first Put = %v, %v", wrote, err)
		}
		if wrote, _ := w.Put(d, data); wrote {
			t.Fatal("the same blob was written twice in one batch")
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(st.Dir(), objectsDir)); len(entries) != 0 {
		t.Fatalf("blobs visible under objects/ before Commit: %v", entries)
	}
	recs, err := w.Commit()
	if err != nil || len(recs) != 2 {
		t.Fatalf("Commit = %v, %v", recs, err)
	}
	byEnc := map[Encoding]BlobRecord{}
	for _, r := range recs {
		byEnc[r.Encoding] = r
	}
	if byEnc[EncodingPacked].Size != int64(len(small)) || byEnc[EncodingRaw].Size != int64(len(large)) {
		t.Fatalf("records %+v", recs)
	}
	if _, err := os.Stat(st.BlobPath(objects.Sum(large))); err != nil {
		t.Fatal("large blob file missing after Commit")
	}
	if _, err := os.Stat(st.PackPath(byEnc[EncodingPacked].Pack)); err != nil {
		t.Fatal("pack missing after Commit")
	}
	if left, _ := os.ReadDir(filepath.Join(st.Dir(), tmpDir)); len(left) != 0 {
		t.Fatalf("temp files left: %v", left)
	}
	if err := st.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, recs) }); err != nil {
		t.Fatal(err)
	}
	known, err := st.KnownBlobs()
	if err != nil {
		t.Fatal(err)
	}
	if wrote, _ := st.NewBlobWriter(known).Put(objects.Sum(small), small); wrote {
		t.Fatal("a blob the store has was written again")
	}
	r := st.NewBlobReader()
	defer r.Close()
	for _, rec := range recs {
		got, err := r.Read(rec, nil)
		if err != nil || objects.Sum(got) != rec.Digest {
			t.Fatalf("Read %v: %v", rec.Encoding, err)
		}
	}
}

func TestAbortRemovesTempFiles(t *testing.T) {
	st := newStore(t)
	w := st.NewBlobWriter(nil)
	for _, data := range [][]byte{small, large} {
		if _, err := w.Put(objects.Sum(data), data); err != nil {
			t.Fatal(err)
		}
	}
	w.Abort()
	if left, _ := os.ReadDir(filepath.Join(st.Dir(), tmpDir)); len(left) != 0 {
		t.Fatalf("temp files left after Abort: %v", left)
	}
	if entries, _ := os.ReadDir(filepath.Join(st.Dir(), objectsDir)); len(entries) != 0 {
		t.Fatalf("aborted blobs were published: %v", entries)
	}
}

func TestReadDetectsCorruptionAndLoss(t *testing.T) {
	for _, data := range [][]byte{small, large} {
		st := newStore(t)
		rec := commit(t, st, []byte("neighbour"), data)[1]
		path, off := st.BlobPath(rec.Digest), int64(0)
		if rec.Encoding == EncodingPacked {
			path, off = st.PackPath(rec.Pack), rec.Offset
		}
		orig, _ := os.ReadFile(path)
		os.Chmod(path, 0o644)
		flipped := bytes.Clone(orig)
		flipped[off+3] ^= 0x10
		cases := map[string][]byte{"bit flip": flipped, "short": orig[:off+5]}
		if rec.Encoding == EncodingRaw {
			cases["long"] = append(bytes.Clone(orig), 'x')
		}
		for name, content := range cases {
			if err := os.WriteFile(path, content, 0o644); err != nil {
				t.Fatal(err)
			}
			r := st.NewBlobReader()
			if _, err := r.Read(rec, nil); !errors.Is(err, errs.IntegrityError) {
				t.Fatalf("%v %s: err = %v, want integrity_error", rec.Encoding, name, err)
			}
			r.Close()
		}
		os.Remove(path)
		if _, err := st.NewBlobReader().Read(rec, nil); !errors.Is(err, errs.IntegrityError) {
			t.Fatalf("missing: err = %v, want integrity_error", err)
		}
	}
}

func TestBlobRecordRoundTrip(t *testing.T) {
	for _, r := range []BlobRecord{
		{Digest: objects.Sum(small), Size: 22, Encoding: EncodingRaw},
		{Digest: objects.Sum(large), Size: 1 << 20, Encoding: EncodingPacked, Pack: PackID{1, 2, 3}, Offset: 12345},
	} {
		got, err := decodeBlobRecord(r.Digest, encodeBlobRecord(r))
		if err != nil || got != r {
			t.Fatalf("round trip %+v → %+v, %v", r, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {1}, {3, 0, 0, 0, 0, 0, 0, 0, 1}, append([]byte{2}, make([]byte, 8)...)} {
		if _, err := decodeBlobRecord(objects.Digest{}, bad); !errors.Is(err, errs.IntegrityError) {
			t.Fatalf("record %x: err = %v", bad, err)
		}
	}
}

func TestRecordsAndManifestLookup(t *testing.T) {
	st := newStore(t)
	m := &objects.Manifest{Schema: objects.ManifestSchema, Format: "safetensors", Files: []objects.File{}, Tensors: []objects.Tensor{}}
	d, enc, err := m.Digest()
	if err != nil {
		t.Fatal(err)
	}
	rec := BlobRecord{Digest: objects.Sum([]byte("x")), Size: 1, Encoding: EncodingRaw}
	err = st.Update(func(tx *bolt.Tx) error {
		if err := RecordBlobs(tx, []BlobRecord{rec}); err != nil {
			return err
		}
		return PutManifest(tx, d, enc)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = st.View(func(tx *bolt.Tx) error {
		got, ok, err := Blob(tx, rec.Digest)
		if err != nil || !ok || got != rec {
			t.Fatalf("Blob = %v %v %v", got, ok, err)
		}
		if _, err := st.Manifest(tx, d); err != nil {
			t.Fatal(err)
		}
		idx := ManifestIndex{Tx: tx}
		for _, prefix := range []string{d.String()[:8], d.String()[:9], d.String()} {
			if got := idx.ManifestsWithPrefix(prefix); len(got) != 1 || got[0] != d {
				t.Fatalf("prefix %s: %v", prefix, got)
			}
		}
		if _, err := st.Manifest(tx, objects.Sum([]byte("other"))); !errors.Is(err, errs.NotFound) {
			t.Fatalf("unknown manifest: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A command that waits for another's lock gives up after LockTimeout with a
// conflict that says what to do, instead of hanging.
func TestLockTimeoutIsConflict(t *testing.T) {
	st := newStore(t)
	held := make(chan struct{})
	release := make(chan struct{})
	go st.Update(func(*bolt.Tx) error {
		close(held)
		<-release
		return nil
	})
	<-held
	defer close(release)
	short := &Store{dir: st.dir, opts: Options{LockTimeout: 100 * time.Millisecond}}
	start := time.Now()
	err := short.Update(func(*bolt.Tx) error { return nil })
	if !errors.Is(err, errs.Conflict) || time.Since(start) > 5*time.Second {
		t.Fatalf("err = %v after %s, want conflict after ~100ms", err, time.Since(start))
	}
}

// A blob fsck marked suspect is left out of KnownBlobs, so the next add
// writes it again; recording the new copy replaces the old record and
// clears the mark. An unmarked blob keeps its record.
func TestSuspectBlobIsRewritten(t *testing.T) {
	st := newStore(t)
	data := bytes.Repeat([]byte("healthy bytes "), 100)
	d := objects.Sum(data)
	other := commit(t, st, []byte("another blob"))[0]
	first := commit(t, st, data)[0]
	known, err := st.KnownBlobs()
	if err != nil {
		t.Fatal(err)
	}
	if !known.Has(d) {
		t.Fatal("a recorded blob is not known")
	}
	err = st.Update(func(tx *bolt.Tx) error { return MarkSuspect(tx, map[objects.Digest]string{d: "corrupt"}) })
	if err != nil {
		t.Fatal(err)
	}
	if known, _ = st.KnownBlobs(); known.Has(d) || !known.Has(other.Digest) {
		t.Fatal("KnownBlobs must leave out exactly the suspect blobs")
	}
	w := st.NewBlobWriter(known)
	if wrote, err := w.Put(d, data); err != nil || !wrote {
		t.Fatalf("a suspect blob is not written again: %v %v", wrote, err)
	}
	recs, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, recs) }); err != nil {
		t.Fatal(err)
	}
	err = st.View(func(tx *bolt.Tx) error {
		rec, _, err := Blob(tx, d)
		if rec == first || rec != recs[0] {
			t.Errorf("record %+v, want the new copy %+v (old %+v)", rec, recs[0], first)
		}
		if len(Suspect(tx)) != 0 {
			t.Errorf("the mark outlives the healing: %v", Suspect(tx))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// A blob marked missing without a record (after a rebuild found no good
	// copy) loses its mark once recorded.
	lost := []byte("a blob no copy of was found")
	st.Update(func(tx *bolt.Tx) error {
		return MarkSuspect(tx, map[objects.Digest]string{objects.Sum(lost): "missing"})
	})
	commit(t, st, lost)
	st.View(func(tx *bolt.Tx) error {
		if len(Suspect(tx)) != 0 {
			t.Errorf("the mark of an unrecorded blob outlives its recording: %v", Suspect(tx))
		}
		return nil
	})
	// Without a mark, a second copy leaves the record alone.
	w = st.NewBlobWriter(nil)
	w.Put(d, data)
	again, _ := w.Commit()
	st.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, again) })
	st.View(func(tx *bolt.Tx) error {
		if rec, _, _ := Blob(tx, d); rec != recs[0] {
			t.Errorf("an unmarked blob's record moved to %+v", rec)
		}
		return nil
	})
}

// Every committed change to the refs is in the journal, batch numbers
// follow the index, and a transaction that fails journals nothing that
// counts: its number is used again by the next one.
func TestJournalFollowsCommits(t *testing.T) {
	st := newStore(t)
	d := objects.Sum([]byte("v"))
	move := func(name string, fail bool) error {
		return st.Update(func(tx *bolt.Tx) error {
			if _, err := refs.Move(tx, name, d, "", time.Unix(1, 2)); err != nil {
				return err
			}
			if fail {
				return errors.New("refused after the move")
			}
			return nil
		})
	}
	if err := move("a", false); err != nil {
		t.Fatal(err)
	}
	if err := move("b", true); err == nil {
		t.Fatal("want the error")
	}
	// A batch journaled and then never committed (a crash between the two).
	if err := journal.Append(st.journalPath(), 2, []journal.Record{{Op: journal.OpMove, Name: "ghost", Digest: d, Time: time.Unix(1, 2).UTC().Format(time.RFC3339Nano)}}); err != nil {
		t.Fatal(err)
	}
	if err := move("c", false); err != nil {
		t.Fatal(err)
	}
	if err := st.Update(func(tx *bolt.Tx) error { return nil }); err != nil { // journals nothing
		t.Fatal(err)
	}
	l, err := journal.Read(st.journalPath())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range l.Batches {
		for _, r := range b.Records {
			got = append(got, fmt.Sprint(b.Seq, " ", r.Op, " ", r.Name))
		}
	}
	if want := []string{"1 move a", "2 move c"}; !slices.Equal(got, want) || l.Replaced != 1 {
		t.Fatalf("journal %v (%+v), want %v", got, l, want)
	}
}

// KnownBlobs is every recorded digest, in key order, in blocks of
// knownBlock (not one list grown by append: 138 MB allocated for the 22 MB
// of 700,000), and Has answers for exactly those, in every block.
func TestKnownBlobsIsEveryRecord(t *testing.T) {
	st := newStore(t)
	n := 2*knownBlock + 5000
	var recs []BlobRecord
	for i := range n {
		d := objects.Sum([]byte{byte(i), byte(i >> 8), byte(i >> 16), 3})
		recs = append(recs, BlobRecord{Digest: d, Size: 64, Encoding: EncodingPacked, Pack: PackID{3}, Offset: int64(i) * 64})
	}
	if err := st.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, recs) }); err != nil {
		t.Fatal(err)
	}
	known, err := st.KnownBlobs()
	if err != nil {
		t.Fatal(err)
	}
	var want []objects.Digest
	for _, r := range recs {
		want = append(want, r.Digest)
	}
	objects.SortDigests(want)
	if len(known.blocks) != 3 || len(known.blocks[0]) != knownBlock || len(known.blocks[1]) != knownBlock {
		t.Fatalf("KnownBlobs of %d digests: %d blocks, want 3, the first two of %d", n, len(known.blocks), knownBlock)
	}
	var halves []digestHalf
	for _, d := range want {
		halves = append(halves, halfOf(d[:]))
	}
	if got := slices.Concat(known.blocks...); !slices.Equal(got, halves) {
		t.Fatalf("KnownBlobs: %d digests, want the first halves of the %d recorded, in key order", len(got), len(want))
	}
	for i, d := range want {
		absent := objects.Sum([]byte{byte(i), byte(i >> 8), byte(i >> 16), 4})
		if !known.Has(d) || known.Has(absent) {
			t.Fatalf("Has(recorded %s) = %v, Has(absent %s) = %v", d.Short(), known.Has(d), absent.Short(), known.Has(absent))
		}
	}
	if (&BlobSet{}).Has(want[0]) {
		t.Fatal("an empty snapshot has a digest")
	}
}

// Once a writer forgets its snapshot, Put asks the index: a blob recorded
// since the snapshot is not written again, a suspect one is, and so is one
// the index does not record.
func TestForgetKnownAsksTheIndex(t *testing.T) {
	st := newStore(t)
	known, err := st.KnownBlobs() // empty
	if err != nil {
		t.Fatal(err)
	}
	commit(t, st, []byte("recorded after the snapshot"))
	suspect := commit(t, st, []byte("marked suspect"))[0]
	err = st.Update(func(tx *bolt.Tx) error {
		return MarkSuspect(tx, map[objects.Digest]string{suspect.Digest: "corrupt"})
	})
	if err != nil {
		t.Fatal(err)
	}
	w := st.NewBlobWriter(known)
	defer w.Abort()
	w.ForgetKnown()
	for _, c := range []struct {
		data  string
		write bool
	}{{"recorded after the snapshot", false}, {"marked suspect", true}, {"new", true}} {
		if wrote, err := w.Put(objects.Sum([]byte(c.data)), []byte(c.data)); err != nil || wrote != c.write {
			t.Errorf("Put(%q) after ForgetKnown: wrote %v (%v), want %v", c.data, wrote, err, c.write)
		}
	}
}

package journal

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/objects"
	"pgregory.net/rapid"
)

func rec(name string) Record {
	return Record{Op: OpMove, Name: name, Digest: objects.Sum([]byte(name)), Time: "2026-01-02T03:04:05.000000006Z", Msg: "line\nbreak"}
}

func mustRead(t *testing.T, path string) *Log {
	t.Helper()
	l, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	// Check finds what Read finds, without the records.
	c, err := Check(path)
	if err != nil {
		t.Fatal(err)
	}
	counts := func(l *Log) Log {
		n := *l
		n.Batches = nil
		for _, b := range l.Batches {
			n.Batches = append(n.Batches, Batch{Seq: b.Seq})
		}
		return n
	}
	for _, b := range c.Batches {
		if b.Records != nil {
			t.Fatalf("Check kept the records of batch %d", b.Seq)
		}
	}
	if got, want := counts(c), counts(l); !reflect.DeepEqual(got, want) {
		t.Fatalf("Check found %+v, Read %+v", got, want)
	}
	return l
}

func names(l *Log) []string {
	var out []string
	for _, b := range l.Batches {
		for _, r := range b.Records {
			out = append(out, r.Name)
		}
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAppendRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	if l := mustRead(t, path); len(l.Batches) != 0 {
		t.Fatalf("a missing journal reads as %+v", l)
	}
	for i, n := range []string{"a", "b"} {
		if err := Append(path, uint64(i+1), []Record{rec(n), rec(n + "2")}); err != nil {
			t.Fatal(err)
		}
	}
	l := mustRead(t, path)
	if got := names(l); !equal(got, []string{"a", "a2", "b", "b2"}) || l.LastSeq() != 2 || l.BadLines+l.Incomplete+l.Replaced != 0 {
		t.Fatalf("read %v (%+v)", got, l)
	}
	if r := l.Batches[0].Records[0]; r != (Record{Op: OpMove, Batch: 1, Name: "a", Digest: objects.Sum([]byte("a")), Time: rec("a").Time, Msg: "line\nbreak"}) {
		t.Fatalf("record did not round-trip: %+v", r)
	}
}

// A crash while appending leaves a torn last line or a batch without its
// end; a crash after the append and before the index commit leaves a whole
// batch whose number the next transaction reuses. Only committed batches
// may come back.
func TestTornAndUncommittedBatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	if err := Append(path, 1, []Record{rec("kept")}); err != nil {
		t.Fatal(err)
	}
	// Batch 2 never committed: whole, then reused by the next transaction.
	if err := Append(path, 2, []Record{rec("uncommitted")}); err != nil {
		t.Fatal(err)
	}
	if err := Append(path, 2, []Record{rec("second")}); err != nil {
		t.Fatal(err)
	}
	// Batch 3 torn: its first lines whole, its third cut in the middle.
	line0, _ := encodeLine(Record{Op: OpBegin, Batch: 3})
	line1, _ := encodeLine(Record{Op: OpMove, Batch: 3, Name: "torn1"})
	line2, _ := encodeLine(Record{Op: OpMove, Batch: 3, Name: "torn2"})
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(line0)
	f.Write(line1)
	f.Write(line2[:len(line2)/2])
	f.Close()
	l := mustRead(t, path)
	if got := names(l); !equal(got, []string{"kept", "second"}) || l.BadLines != 1 || l.Incomplete != 1 || l.Replaced != 1 {
		t.Fatalf("read %v (%+v)", got, l)
	}
	// The next append (batch 3 again) must not be swallowed by the torn line.
	if err := Append(path, 3, []Record{rec("after")}); err != nil {
		t.Fatal(err)
	}
	if got := names(mustRead(t, path)); !equal(got, []string{"kept", "second", "after"}) {
		t.Fatalf("after a torn tail: read %v", got)
	}
	// A flipped byte in a committed line loses that batch only, and says so.
	b, _ := os.ReadFile(path)
	first, _ := encodeLine(Record{Op: OpBegin, Batch: 1})
	b[len(first)+20] ^= 1
	os.WriteFile(path, b, 0o644)
	l = mustRead(t, path)
	if got := names(l); !equal(got, []string{"second", "after"}) || l.BadLines != 2 || l.Damaged != 1 {
		t.Fatalf("after a flipped byte: read %v (%+v)", got, l)
	}
}

func TestPendingDrain(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "db"), 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		for _, n := range []string{"x", "y", "z"} {
			if err := Add(tx, rec(n)); err != nil {
				return err
			}
		}
		got, err := Drain(tx)
		if err != nil {
			return err
		}
		if len(got) != 3 || got[0].Name != "x" || got[2].Name != "z" {
			t.Errorf("drained %+v", got)
		}
		if err := Add(tx, rec("rolled back")); err != nil {
			return err
		}
		Discard(tx)
		again, err := Drain(tx)
		if len(again) != 0 || err != nil {
			t.Errorf("second drain (after a discard): %v %v", again, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *bolt.Tx) error { return Add(tx, rec("read-only")) })
	if err == nil {
		t.Error("a record noted in a read-only transaction was taken")
	}
}

func FuzzRead(f *testing.F) {
	line, _ := encodeLine(rec("a"))
	end, _ := encodeLine(Record{Op: OpEnd})
	f.Add(append(line, end...))
	run, _ := encodeLine(PackRuns("aa", []PackMember{{Digest: objects.Sum(nil), Offset: 3, Size: 5}})[0])
	f.Add(append(append(line, run...), end...))
	f.Add([]byte("00000000 {}\n\n\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "j")
		os.WriteFile(path, b, 0o644)
		l, err := Read(path)
		if err != nil {
			t.Fatal(err)
		}
		// Check counts what Read counts, batch by batch, without the
		// records (its pack runs are decoded, not expanded).
		c, err := Check(path)
		if err != nil {
			t.Fatal(err)
		}
		seqs := func(l *Log) (out []uint64) {
			for _, b := range l.Batches {
				out = append(out, b.Seq)
			}
			return out
		}
		if c.BadLines != l.BadLines || c.Incomplete != l.Incomplete || c.Replaced != l.Replaced || c.Damaged != l.Damaged ||
			c.Orphans != l.Orphans || c.Lines != l.Lines || !slices.Equal(seqs(c), seqs(l)) {
			t.Fatalf("Check %+v, Read %+v", *c, *l)
		}
	})
}

// TestRecordEncoding: the journal's own encoder writes exactly what
// encoding/json writes, for every field set or unset and strings that JSON
// escapes (HTML characters, control bytes, invalid UTF-8, U+2028).
func TestRecordEncoding(t *testing.T) {
	str := rapid.OneOf(rapid.Just(""), rapid.StringMatching(`[a-z0-9/._:-]{1,12}`), rapid.String(),
		rapid.SampledFrom([]string{"a<b", "&", "x\u2028y", "\xff\xfe", "tab\t", `q"uote`, `back\\slash`}))
	num := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64())
	dig := func(t *rapid.T, label string) objects.Digest {
		if rapid.Bool().Draw(t, label+"?") {
			return objects.Digest{}
		}
		return objects.Digest(rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, label))
	}
	rapid.Check(t, func(t *rapid.T) {
		r := Record{Op: Op(str.Draw(t, "op")), Batch: rapid.Uint64().Draw(t, "b"), Name: str.Draw(t, "name"), Tag: str.Draw(t, "tag"),
			Digest: dig(t, "digest"), Time: str.Draw(t, "time"), Msg: str.Draw(t, "msg"), Keep: int(num.Draw(t, "keep")),
			Pack: str.Draw(t, "pack"), Offset: num.Draw(t, "off"), Size: num.Draw(t, "size"), Enc: str.Draw(t, "enc"),
			Raw: num.Draw(t, "raw"), Base: dig(t, "base"), Members: str.Draw(t, "members")}
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendRecord(nil, r)
		if err != nil || string(got) != string(want) {
			t.Fatalf("encoded %s, encoding/json writes %s (%v)", got, want, err)
		}
		line, _ := encodeLine(r)
		if back, ok := decodeLine(line[:len(line)-1]); r.Op != "" && (!ok || back != r) && utf8Clean(r) {
			t.Fatalf("line %q reads back as %+v (%v)", line, back, ok)
		}
	})
}

// utf8Clean reports whether every string of r survives a JSON round trip.
func utf8Clean(r Record) bool {
	for _, s := range []string{string(r.Op), r.Name, r.Tag, r.Time, r.Msg, r.Pack, r.Enc, r.Members} {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

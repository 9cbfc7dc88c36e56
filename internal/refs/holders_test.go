package refs

import (
	"maps"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// TestHolders: with nothing taken away, Holders keeps exactly what
// Referenced (gc's mark) keeps; each Without takes away what the command it
// stands for would, and no more.
func TestHolders(t *testing.T) {
	db := openDB(t)
	move(t, db, "m", dig(1), "")
	move(t, db, "m", dig(2), "")
	move(t, db, "m", dig(3), "")
	tag(t, db, "m", "v1", dig(1))
	move(t, db, "other", dig(2), "")
	tag(t, db, "gone", "t", dig(4)) // a name with a tag only

	keys := func(m map[objects.Digest][]Holder) []objects.Digest {
		return slices.SortedFunc(maps.Keys(m), func(a, b objects.Digest) int { return slices.Compare(a[:], b[:]) })
	}
	names := func(hs []Holder) []string {
		var out []string
		for _, h := range hs {
			out = append(out, h.String())
		}
		slices.Sort(out)
		return out
	}
	view(t, db, func(tx *bolt.Tx) error {
		ref, err := Referenced(tx)
		if err != nil {
			return err
		}
		kept, dropped, err := Holders(tx, Without{})
		if err != nil {
			return err
		}
		if len(dropped) != 0 || !slices.Equal(keys(kept), slices.SortedFunc(maps.Keys(ref), func(a, b objects.Digest) int { return slices.Compare(a[:], b[:]) })) {
			t.Errorf("Holders(Without{}) keeps %v, Referenced %v", keys(kept), ref)
		}
		if got := names(kept[dig(1)]); !slices.Equal(got, []string{"m:v1", "m~2"}) {
			t.Errorf("holders of 1: %v", got)
		}
		if got := names(kept[dig(3)]); !slices.Equal(got, []string{"m"}) {
			t.Errorf("holders of 3: %v (the current target is NAME, not also NAME~0)", got)
		}

		for _, tc := range []struct {
			name     string
			w        Without
			unnamed  []objects.Digest // no holder left
			keptWith map[objects.Digest][]string
		}{
			{"rm m", Without{Refs: map[string]bool{"m": true}}, []objects.Digest{dig(3)},
				map[objects.Digest][]string{dig(1): {"m:v1"}, dig(2): {"other"}}},
			{"rm m:v1", Without{Tags: map[string]bool{"m:v1": true}}, nil, map[objects.Digest][]string{dig(1): {"m~2"}}},
			{"trim m --keep 1", Without{Keep: map[string]int{"m": 1}}, nil, map[objects.Digest][]string{dig(1): {"m:v1"}, dig(2): {"other"}}},
			{"every name of 2", Without{Versions: map[objects.Digest]bool{dig(2): true}}, []objects.Digest{dig(2)}, nil},
		} {
			kept, dropped, err := Holders(tx, tc.w)
			if err != nil {
				return err
			}
			var unnamed []objects.Digest
			for _, d := range keys(dropped) {
				if _, ok := kept[d]; !ok {
					unnamed = append(unnamed, d)
				}
			}
			if !slices.Equal(unnamed, tc.unnamed) {
				t.Errorf("%s: unnamed %v, want %v", tc.name, unnamed, tc.unnamed)
			}
			for d, want := range tc.keptWith {
				if got := names(kept[d]); !slices.Equal(got, want) {
					t.Errorf("%s: %s kept by %v, want %v", tc.name, d.Short(), got, want)
				}
			}
		}
		wantClass(t, CheckWithout(tx, Without{Refs: map[string]bool{"nosuch": true}}), errs.NotFound)
		wantClass(t, CheckWithout(tx, Without{Tags: map[string]bool{"m:nosuch": true}}), errs.NotFound)
		wantClass(t, CheckWithout(tx, Without{Keep: map[string]int{"gone": 1}}), errs.NotFound)
		return CheckWithout(tx, Without{Refs: map[string]bool{"m": true}, Tags: map[string]bool{"gone:t": true}})
	})
}

// TestCopyRename: Copy starts a history of one entry; Rename moves the
// whole history (digests, messages, times) and leaves the tags; both
// refuse a name that is a ref (conflict) and names that are not valid.
func TestCopyRename(t *testing.T) {
	db := openDB(t)
	move(t, db, "m", dig(1), "one")
	move(t, db, "m", dig(2), "two")
	tag(t, db, "m", "v1", dig(1))
	move(t, db, "taken", dig(9), "")
	var before []Entry
	view(t, db, func(tx *bolt.Tx) (err error) { before, err = History(tx, "m"); return err })

	update(t, db, func(tx *bolt.Tx) error {
		_, err := Copy(tx, "copy", dig(1), "copied from m:v1", before[0].Time)
		return err
	})
	update(t, db, func(tx *bolt.Tx) error {
		n, err := Rename(tx, "m", "renamed")
		if n != 2 {
			t.Errorf("Rename moved %d entries, want 2", n)
		}
		return err
	})
	view(t, db, func(tx *bolt.Tx) error {
		after, err := History(tx, "renamed")
		if err != nil {
			return err
		}
		if len(after) != len(before) {
			t.Fatalf("renamed history %+v, want %+v", after, before)
		}
		for i := range after {
			if after[i].Digest != before[i].Digest || after[i].Message != before[i].Message || !after[i].Time.Equal(before[i].Time) {
				t.Errorf("entry %d: %+v, want %+v", i, after[i], before[i])
			}
		}
		_, err = Current(tx, "m")
		wantClass(t, err, errs.NotFound)
		if d, err := resolveTag(tx, "m", "v1"); err != nil || d != dig(1) {
			t.Errorf("m:v1 after the rename: %v %v, want it kept at 1", d, err)
		}
		hist, err := History(tx, "copy")
		if err != nil || len(hist) != 1 || hist[0].Digest != dig(1) {
			t.Errorf("copy's history: %+v %v", hist, err)
		}
		return nil
	})
	update(t, db, func(tx *bolt.Tx) error {
		_, err := Rename(tx, "renamed", "taken")
		wantClass(t, err, errs.Conflict, "taken")
		_, err = Copy(tx, "taken", dig(1), "", before[0].Time)
		wantClass(t, err, errs.Conflict)
		_, err = Rename(tx, "renamed", "renamed")
		wantClass(t, err, errs.Conflict)
		_, err = Rename(tx, "nosuch", "x")
		wantClass(t, err, errs.NotFound)
		_, err = Rename(tx, "renamed", "../x")
		wantClass(t, err, errs.SchemaError)
		return nil
	})
}

// TestPastedDigests: blake3:HEX (any case, alone or after NAME@) is the
// digest; sha256:… is refused, saying what to use.
func TestPastedDigests(t *testing.T) {
	hex := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for in, want := range map[string]Spec{
		"blake3:" + hex:            {Kind: KindDigest, Name: hex, Digest: hex},
		"BLAKE3:0123ABCDEF":        {Kind: KindDigest, Name: "0123abcdef", Digest: "0123abcdef"},
		"acme/m@blake3:0123abcdef": {Kind: KindPinned, Name: "acme/m", Digest: "0123abcdef"},
		"blake3:v1":                {Kind: KindTag, Name: "blake3", Tag: "v1"}, // not hex: the tag v1 of ref blake3
	} {
		got, err := ParseSpec(in)
		if err != nil || got != want {
			t.Errorf("ParseSpec(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"sha256:" + hex, "acme/m@sha256:" + hex, "SHA256:abc"} {
		_, err := ParseSpec(in)
		wantClass(t, err, errs.SchemaError, "BLAKE3", "show --sha256")
	}
}

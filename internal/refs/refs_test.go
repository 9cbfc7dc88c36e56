package refs

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

func history(t *testing.T, db *bolt.DB, name string) []Entry {
	t.Helper()
	var h []Entry
	view(t, db, func(tx *bolt.Tx) error {
		var err error
		h, err = History(tx, name)
		return err
	})
	return h
}

func TestHistoryIsAppendOnlyNewestFirst(t *testing.T) {
	db := openDB(t)
	var made []Entry
	for i, msg := range []string{"a", "bb", "ccc", "dddd"} {
		e := move(t, db, "acme/m", dig(i), msg)
		if e.Seq != uint64(i+1) {
			t.Fatalf("move %d got seq %d", i, e.Seq)
		}
		made = append(made, e)
		// Entries already written never change.
		h := history(t, db, "acme/m")
		if len(h) != i+1 {
			t.Fatalf("history has %d entries after %d moves", len(h), i+1)
		}
		for j, got := range h {
			if want := made[i-j]; !reflect.DeepEqual(got, want) {
				t.Fatalf("entry %d: got %+v, want %+v", j, got, want)
			}
		}
	}
	h := history(t, db, "acme/m")
	for i, e := range h {
		if i+1 < len(h) && e.Previous != h[i+1].Digest {
			t.Errorf("entry %d: previous %s, want %s", e.Seq, e.Previous.Short(), h[i+1].Digest.Short())
		}
	}
	if first := h[len(h)-1]; !first.Previous.IsZero() || first.Message != "a" {
		t.Errorf("first entry %+v", first)
	}
	if h[0].Time.Location() != time.UTC || !h[0].Time.Equal(t0.Add(4*time.Second)) {
		t.Errorf("time %v", h[0].Time)
	}
	view(t, db, func(tx *bolt.Tx) error {
		cur, err := Current(tx, "acme/m")
		if err != nil || cur != dig(3) {
			t.Errorf("Current = %s, %v", cur.Short(), err)
		}
		return Check(tx)
	})
}

func TestMoveToCurrentAppendsNothing(t *testing.T) {
	db := openDB(t)
	first := move(t, db, "m", dig(1), "one")
	again := move(t, db, "m", dig(1), "one again")
	if !reflect.DeepEqual(first, again) {
		t.Fatalf("no-op move returned %+v, want %+v", again, first)
	}
	if h := history(t, db, "m"); len(h) != 1 {
		t.Fatalf("history has %d entries", len(h))
	}
	// Moving back to an older digest is a move.
	move(t, db, "m", dig(2), "two")
	if e := move(t, db, "m", dig(1), "back"); e.Seq != 3 || e.Previous != dig(2) {
		t.Fatalf("move back: %+v", e)
	}
}

func TestMoveRefuses(t *testing.T) {
	db := openDB(t)
	long := make([]byte, MaxMessageLen+1)
	for _, tc := range []struct {
		name  string
		ref   string
		d     objects.Digest
		msg   string
		class errs.Class
	}{
		{"bad name", "a/../b", dig(1), "", errs.SchemaError},
		{"zero digest", "m", objects.Digest{}, "", errs.SchemaError},
		{"long message", "m", dig(1), string(long), errs.SizeLimitExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := db.Update(func(tx *bolt.Tx) error {
				_, err := Move(tx, tc.ref, tc.d, tc.msg, t0)
				return err
			})
			wantClass(t, err, tc.class)
		})
	}
	err := db.View(func(tx *bolt.Tx) error {
		_, err := Move(tx, "m", dig(1), "", t0)
		return err
	})
	if err == nil {
		t.Fatal("Move in a read-only transaction succeeded")
	}
}

func TestTagsAreImmutable(t *testing.T) {
	db := openDB(t)
	tagOnce := func(name, tg string, d objects.Digest) (bool, error) {
		var created bool
		err := db.Update(func(tx *bolt.Tx) error {
			var err error
			created, err = Tag(tx, name, tg, d)
			return err
		})
		return created, err
	}
	if created, err := tagOnce("acme/m", "v1", dig(1)); !created || err != nil {
		t.Fatalf("first tag: %v, %v", created, err)
	}
	t.Run("same digest is a no-op", func(t *testing.T) {
		if created, err := tagOnce("acme/m", "v1", dig(1)); created || err != nil {
			t.Fatalf("got %v, %v", created, err)
		}
	})
	t.Run("other digest is a conflict naming both", func(t *testing.T) {
		_, err := tagOnce("acme/m", "v1", dig(2))
		wantClass(t, err, errs.Conflict, "acme/m:v1", dig(1).String(), dig(2).String(), "immutable")
	})
	t.Run("other name or tag is independent", func(t *testing.T) {
		for _, nt := range [][2]string{{"acme/m", "v2"}, {"acme/m2", "v1"}, {"acme", "v1"}} {
			if created, err := tagOnce(nt[0], nt[1], dig(2)); !created || err != nil {
				t.Fatalf("%s:%s: %v, %v", nt[0], nt[1], created, err)
			}
		}
	})
	t.Run("bad input", func(t *testing.T) {
		_, err := tagOnce("acme/m", ".v", dig(1))
		wantClass(t, err, errs.SchemaError)
		_, err = tagOnce("acme//m", "v", dig(1))
		wantClass(t, err, errs.SchemaError)
		_, err = tagOnce("acme/m", "v9", objects.Digest{})
		wantClass(t, err, errs.SchemaError)
	})
	view(t, db, func(tx *bolt.Tx) error {
		all, err := Tags(tx)
		if err != nil {
			return err
		}
		want := []TagRef{{"acme", "v1", dig(2)}, {"acme/m", "v1", dig(1)}, {"acme/m", "v2", dig(2)}, {"acme/m2", "v1", dig(2)}}
		if !reflect.DeepEqual(all, want) {
			t.Errorf("Tags = %+v", all)
		}
		of, err := TagsOf(tx, "acme/m")
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(of, want[1:3]) {
			t.Errorf("TagsOf = %+v", of)
		}
		if none, err := TagsOf(tx, "other"); err != nil || len(none) != 0 {
			t.Errorf("TagsOf(other) = %v, %v", none, err)
		}
		return Check(tx)
	})
	t.Run("removed tag comes back only at its digest", func(t *testing.T) {
		var was objects.Digest
		db.View(func(tx *bolt.Tx) (err error) {
			was, err = Resolve(tx, Spec{Kind: KindTag, Name: "acme/m", Tag: "v1"}, nil)
			return err
		})
		update(t, db, func(tx *bolt.Tx) error { return RemoveTag(tx, "acme/m", "v1") })
		other := dig(3)
		if other == was {
			other = dig(4)
		}
		_, err := tagOnce("acme/m", "v1", other)
		wantClass(t, err, errs.Conflict, "was removed")
		if created, err := tagOnce("acme/m", "v1", was); !created || err != nil {
			t.Fatalf("re-creating at the same digest: %v, %v", created, err)
		}
		err = db.Update(func(tx *bolt.Tx) error { return RemoveTag(tx, "acme/m", "nope") })
		wantClass(t, err, errs.NotFound, "acme/m:nope")
	})
}

func TestRemoveRefKeepsTags(t *testing.T) {
	db := openDB(t)
	move(t, db, "m", dig(1), "")
	move(t, db, "m", dig(2), "")
	tag(t, db, "m", "v1", dig(1))
	update(t, db, func(tx *bolt.Tx) error { return RemoveRef(tx, "m") })
	view(t, db, func(tx *bolt.Tx) error {
		_, err := Current(tx, "m")
		wantClass(t, err, errs.NotFound, `"m"`, "mstore ls")
		_, err = History(tx, "m")
		wantClass(t, err, errs.NotFound)
		if d, err := Resolve(tx, Spec{Kind: KindTag, Name: "m", Tag: "v1"}, nil); err != nil || d != dig(1) {
			t.Errorf("tag after RemoveRef: %s, %v", d.Short(), err)
		}
		refd, err := Referenced(tx)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(refd, map[objects.Digest]bool{dig(1): true}) {
			t.Errorf("Referenced = %v", refd)
		}
		return Check(tx)
	})
	err := db.Update(func(tx *bolt.Tx) error { return RemoveRef(tx, "m") })
	wantClass(t, err, errs.NotFound)
	// A ref created again under the name starts a new history.
	if e := move(t, db, "m", dig(3), ""); e.Seq != 1 || !e.Previous.IsZero() {
		t.Fatalf("recreated ref: %+v", e)
	}
}

func TestTrimHistory(t *testing.T) {
	for _, tc := range []struct {
		keep, wantKept int
	}{
		{keep: 2, wantKept: 2},
		{keep: 0, wantKept: 1},
		{keep: -3, wantKept: 1},
		{keep: 5, wantKept: 5},
		{keep: 9, wantKept: 5},
	} {
		t.Run(fmt.Sprintf("keep=%d", tc.keep), func(t *testing.T) {
			db := openDB(t)
			for i := range 5 {
				move(t, db, "m", dig(i), "")
			}
			tag(t, db, "m", "first", dig(0))
			var removed int
			update(t, db, func(tx *bolt.Tx) error {
				var err error
				removed, err = TrimHistory(tx, "m", tc.keep)
				return err
			})
			if removed != 5-tc.wantKept {
				t.Errorf("removed %d", removed)
			}
			h := history(t, db, "m")
			if len(h) != tc.wantKept || h[0].Digest != dig(4) || h[0].Seq != 5 {
				t.Fatalf("kept %+v", h)
			}
			if e := move(t, db, "m", dig(9), ""); e.Seq != 6 {
				t.Errorf("seq after trim: %d", e.Seq)
			}
			view(t, db, func(tx *bolt.Tx) error {
				refs, err := List(tx)
				if err != nil {
					return err
				}
				if len(refs) != 1 || refs[0].Entries != tc.wantKept+1 {
					t.Errorf("List = %+v", refs)
				}
				refd, err := Referenced(tx)
				if err != nil {
					return err
				}
				// The tag keeps dig(0) alive; trimmed entries do not.
				want := map[objects.Digest]bool{dig(0): true, dig(9): true}
				for _, e := range h {
					want[e.Digest] = true
				}
				if !reflect.DeepEqual(refd, want) {
					t.Errorf("Referenced has %d digests, want %d", len(refd), len(want))
				}
				return Check(tx)
			})
		})
	}
	db := openDB(t)
	err := db.Update(func(tx *bolt.Tx) error { _, err := TrimHistory(tx, "nope", 1); return err })
	wantClass(t, err, errs.NotFound)
}

func TestList(t *testing.T) {
	db := openDB(t)
	move(t, db, "b", dig(1), "x")
	move(t, db, "a/z", dig(2), "")
	move(t, db, "a/z", dig(3), "yy")
	move(t, db, "a", dig(4), "")
	view(t, db, func(tx *bolt.Tx) error {
		got, err := List(tx)
		want := []Ref{
			{Name: "a", Current: dig(4), Entries: 1, Moved: t0},
			{Name: "a/z", Current: dig(3), Entries: 2, Moved: t0.Add(2 * time.Second)},
			{Name: "b", Current: dig(1), Entries: 1, Moved: t0.Add(time.Second)},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("List = %+v", got)
		}
		return err
	})
}

func TestReadsWithoutBuckets(t *testing.T) {
	db, err := bolt.Open(t.TempDir()+"/empty.db", 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	view(t, db, func(tx *bolt.Tx) error {
		if l, err := List(tx); err != nil || l != nil {
			t.Errorf("List = %v, %v", l, err)
		}
		if l, err := Tags(tx); err != nil || l != nil {
			t.Errorf("Tags = %v, %v", l, err)
		}
		if r, err := Referenced(tx); err != nil || len(r) != 0 {
			t.Errorf("Referenced = %v, %v", r, err)
		}
		_, err := Current(tx, "m")
		wantClass(t, err, errs.NotFound)
		_, err = Resolve(tx, Spec{Kind: KindTag, Name: "m", Tag: "v"}, nil)
		wantClass(t, err, errs.NotFound)
		return Check(tx)
	})
	// Writes create the buckets themselves.
	update(t, db, func(tx *bolt.Tx) error { _, err := Move(tx, "m", dig(1), "", t0); return err })
}

func TestCheckFindsDamage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(tx *bolt.Tx) error
		want   string
		class  errs.Class
	}{
		{"ref without history", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketHistory).DeleteBucket([]byte("m"))
		}, `ref "m" has no history`, errs.IntegrityError},
		{"history without ref", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketRefs).Delete([]byte("m"))
		}, "belongs to no ref", errs.IntegrityError},
		{"wrong current", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketRefs).Put([]byte("m"), refRecord{current: dig(7), entries: 2, moved: t0}.encode())
		}, "points at", errs.IntegrityError},
		{"wrong count", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketRefs).Put([]byte("m"), refRecord{current: dig(2), entries: 3, moved: t0}.encode())
		}, "records 3 history entries, has 2", errs.IntegrityError},
		{"truncated entry", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketHistory).Bucket([]byte("m")).Put(seqKey(1), []byte{recordVersion, 1, 2})
		}, "record is 3 bytes", errs.IntegrityError},
		{"broken chain", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketHistory).Bucket([]byte("m")).Put(seqKey(2), encodeEntry(Entry{Digest: dig(2), Previous: dig(8), Time: t0}))
		}, "entry 2 follows", errs.IntegrityError},
		{"future record version", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketTags).Put(tagKey("m", "v"), append([]byte{9}, dig(1).String()[:32]...))
		}, "record version 9", errs.IntegrityError},
		{"bad tag key", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketTags).Put([]byte("m:v"), encodeTag(dig(1)))
		}, "not NAME, NUL, TAG", errs.IntegrityError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			move(t, db, "m", dig(1), "")
			move(t, db, "m", dig(2), "")
			update(t, db, tc.damage)
			err := db.View(Check)
			wantClass(t, err, tc.class, tc.want)
		})
	}
}

func TestDamagedRecordsAreReported(t *testing.T) {
	db := openDB(t)
	move(t, db, "m", dig(1), "")
	update(t, db, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRefs).Put([]byte("m"), []byte{recordVersion})
	})
	view(t, db, func(tx *bolt.Tx) error {
		_, err := Current(tx, "m")
		wantClass(t, err, errs.IntegrityError, `ref m`)
		_, err = List(tx)
		wantClass(t, err, errs.IntegrityError)
		_, err = Referenced(tx)
		wantClass(t, err, errs.IntegrityError)
		return nil
	})
	update(t, db, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRefs).Put([]byte("m"), append([]byte{2}, make([]byte, refRecordLen-1)...))
	})
	view(t, db, func(tx *bolt.Tx) error {
		_, err := Current(tx, "m")
		wantClass(t, err, errs.UnsupportedVersion, "record version 2")
		return nil
	})
}

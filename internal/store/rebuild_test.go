package store_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/gc"
	"github.com/mstore/mstore/internal/journal"
	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/store/storetest"
)

// namesOf is everything the refs say: each ref's history, every tag, and
// which tags were retired (they may come back only at the same digest).
type namesOf struct {
	Refs    []refs.Ref
	History map[string][]refs.Entry
	Tags    []refs.TagRef
}

func readNames(t *testing.T, st *store.Store) namesOf {
	t.Helper()
	n := namesOf{History: map[string][]refs.Entry{}}
	err := st.View(func(tx *bolt.Tx) error {
		var err error
		if n.Refs, err = refs.List(tx); err != nil {
			return err
		}
		for _, r := range n.Refs {
			if n.History[r.Name], err = refs.History(tx, r.Name); err != nil {
				return err
			}
		}
		n.Tags, err = refs.Tags(tx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func update(t *testing.T, st *store.Store, fn func(tx *bolt.Tx) error) {
	t.Helper()
	if err := st.Update(fn); err != nil {
		t.Fatal(err)
	}
}

// TestRebuildIndex makes a store with adds, moves, tags, a removed tag, a
// trim, a removed ref and a gc (which repacks), damages or deletes its
// index in each way, rebuilds it, and requires the same names, the same
// histories (sequence numbers, times, messages), every version checking out
// byte for byte, a clean fsck, and the old index kept.
func TestRebuildIndex(t *testing.T) {
	damages := map[string]func(t *testing.T, path string){
		"deleted": func(t *testing.T, path string) { os.Remove(path) },
		"truncated": func(t *testing.T, path string) {
			if err := os.Truncate(path, 3*4096); err != nil {
				t.Fatal(err)
			}
		},
		"zeroed": func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			clear(b[2*4096:])
			os.WriteFile(path, b, 0o644)
		},
		"garbage": func(t *testing.T, path string) { os.WriteFile(path, []byte(strings.Repeat("not bbolt ", 1000)), 0o644) },
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			st, err := store.Open(filepath.Join(root, "store"), true, store.Options{LockTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			v1 := storetest.Variant(t, root, "v1", 1)
			v2 := storetest.Variant(t, root, "v2", 1, 2)
			v3 := storetest.Variant(t, root, "v3", 3)
			d1 := storetest.Add(t, st, v1, "m")
			d2 := storetest.Add(t, st, v2, "m")
			storetest.Add(t, st, v1, "other")
			storetest.Add(t, st, v3, "gone")
			at := time.Date(2026, 3, 4, 5, 6, 7, 890, time.UTC)
			update(t, st, func(tx *bolt.Tx) error {
				if _, err := refs.Tag(tx, "m", "v1", d1); err != nil {
					return err
				}
				if _, err := refs.Tag(tx, "m", "tmp", d2); err != nil {
					return err
				}
				_, err := refs.Move(tx, "m", d1, "back to v1", at)
				return err
			})
			update(t, st, func(tx *bolt.Tx) error {
				if _, err := refs.Move(tx, "m", d2, "forward again\nwith a newline", at.Add(time.Second)); err != nil {
					return err
				}
				if _, err := refs.TrimHistory(tx, "m", 3); err != nil {
					return err
				}
				if err := refs.RemoveTag(tx, "m", "tmp"); err != nil {
					return err
				}
				return refs.RemoveRef(tx, "gone")
			})
			if _, _, err := gc.Run(context.Background(), st, gc.Options{Grace: -1}); err != nil {
				t.Fatal(err)
			}
			storetest.Fsck(t, st, store.FsckOptions{})
			before := readNames(t, st)
			if len(before.History["m"]) != 3 || before.History["m"][0].Seq != 4 {
				t.Fatalf("test setup: history of m is %+v", before.History["m"])
			}

			index := filepath.Join(st.Dir(), "index.db")
			damage(t, index)
			if _, err := store.Open(st.Dir(), true, store.Options{}); !errors.Is(err, errs.IntegrityError) {
				t.Fatalf("open of a %s index: %v, want integrity_error", name, err)
			}
			rep, err := names.RebuildIndex(context.Background(), st.Dir(), store.Options{}, 2)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK || rep.Refs != 2 || rep.Tags != 1 {
				t.Fatalf("rebuild: %+v", rep)
			}
			if (name == "deleted") != (rep.OldIndex == "") {
				t.Fatalf("old index moved to %q", rep.OldIndex)
			}
			if rep.OldIndex != "" {
				if _, err := os.Stat(filepath.Join(st.Dir(), rep.OldIndex)); err != nil {
					t.Fatalf("the old index is not kept: %v", err)
				}
			}
			st, err = store.Open(st.Dir(), false, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if after := readNames(t, st); !reflect.DeepEqual(after, before) {
				t.Fatalf("names after the rebuild:\n%+v\nbefore:\n%+v", after, before)
			}
			storetest.Fsck(t, st, store.FsckOptions{})
			storetest.RequireCheckout(t, st, "m", v2)
			storetest.RequireCheckout(t, st, "m:v1", v1)
			storetest.RequireCheckout(t, st, "m~1", v1)
			storetest.RequireCheckout(t, st, "other", v1)
			// The retired tag is still retired: it cannot come back elsewhere.
			err = st.Update(func(tx *bolt.Tx) error { _, err := refs.Tag(tx, "m", "tmp", d1); return err })
			if !errors.Is(err, errs.Conflict) {
				t.Fatalf("re-creating a retired tag at another version: %v, want conflict", err)
			}
			// The store goes on: an add after the rebuild journals on.
			storetest.Add(t, st, v3, "again")
			if rep, err := names.RebuildIndex(context.Background(), st.Dir(), store.Options{}, 2); err != nil || !rep.OK || rep.Refs != 3 {
				t.Fatalf("second rebuild: %+v, %v", rep, err)
			}
		})
	}
}

// TestDamagedIndexNeverCrashes damages index.db in many ways and requires
// every read and write path to fail with integrity_error or succeed, never
// panic or fault; fsck must say what is wrong.
func TestDamagedIndexNeverCrashes(t *testing.T) {
	st, _ := oneVersion(t)
	good, err := os.ReadFile(filepath.Join(st.Dir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	type damage struct {
		name string
		fn   func([]byte) []byte
		// must is true when every command must refuse (the damage hits
		// pages in use); random flips may hit free pages.
		must bool
	}
	var cases []damage
	// bbolt grows the file ahead of its pages (InitialMmapSize): half of the
	// pages in use is a real truncation, half of the file may not be.
	m0, m1 := binary.LittleEndian.Uint64(good[16+40:]), binary.LittleEndian.Uint64(good[4096+16+40:])
	inUse := int(max(m0, m1)) * 4096
	for _, n := range []int{0, 100, 4096, 3 * 4096, inUse / 2, inUse - 1} {
		cases = append(cases, damage{fmt.Sprintf("truncated to %d", n), func(b []byte) []byte { return b[:n] }, true})
	}
	cases = append(cases,
		damage{"meta pages zeroed", func(b []byte) []byte { clear(b[:2*4096]); return b }, true},
		damage{"data pages zeroed", func(b []byte) []byte { clear(b[2*4096:]); return b }, true},
		damage{"every page's flags flipped", func(b []byte) []byte {
			for p := 2 * 4096; p+10 < len(b); p += 4096 {
				b[p+8] ^= 0xff
			}
			return b
		}, true})
	for seed := range 40 {
		cases = append(cases, damage{fmt.Sprintf("random flips %d", seed), func(b []byte) []byte {
			x := uint64(seed)*0x9E3779B97F4A7C15 + 1
			for range 1 + seed%16 {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				b[x%uint64(len(b))] ^= byte(1 << (x >> 60 % 8))
			}
			return b
		}, false})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(st.Dir(), "index.db"), c.fn(append([]byte{}, good...)), 0o644); err != nil {
				t.Fatal(err)
			}
			ops := map[string]func() error{
				"open":    func() error { _, err := store.Open(st.Dir(), false, store.Options{}); return err },
				"resolve": func() error { _, err := names.Resolve(st, "m"); return err },
				"known":   func() error { _, err := st.KnownBlobs(); return err },
				"usage":   func() error { _, err := st.Usage(); return err },
				"fsck": func() error {
					r, err := names.Fsck(context.Background(), st, store.FsckOptions{})
					return fsckErr(r, err)
				},
				"gc": func() error { _, _, err := gc.Run(context.Background(), st, gc.Options{DryRun: true}); return err },
				"tag": func() error {
					return st.Update(func(tx *bolt.Tx) error { _, err := refs.Tag(tx, "m", "t", objects.Sum(nil)); return err })
				},
			}
			for name, op := range ops {
				err := op()
				if c.must && !errors.Is(err, errs.IntegrityError) {
					t.Errorf("%s: %v, want integrity_error", name, err)
				}
				if err != nil && errs.ClassOf(err) == 0 {
					t.Errorf("%s: unclassified error %v", name, err)
				}
			}
		})
	}
}

func fsckErr(r *store.FsckReport, err error) error {
	if err == nil && !r.OK {
		return errs.New(errs.IntegrityError, "test", "fsck found %d corrupt", len(r.Corrupt))
	}
	return err
}

// A journal record of a packed blob whose offset and size overflow int64
// is a copy the rebuild leaves out, not one it reads (it made the rebuild
// panic, slicing past its window).
func TestRebuildSkipsPackedRecordThatOverflows(t *testing.T) {
	st, v1 := oneVersion(t)
	var packed store.BlobRecord
	st.View(func(tx *bolt.Tx) error {
		return store.ForEachBlob(tx, func(r store.BlobRecord) error {
			if r.Encoding == store.EncodingPacked {
				packed = r
			}
			return nil
		})
	})
	if packed.Encoding != store.EncodingPacked {
		t.Fatal("test setup: no packed blob")
	}
	update(t, st, func(tx *bolt.Tx) error {
		return journal.Add(tx, journal.Record{Op: journal.OpPacked, Digest: objects.Sum([]byte("elsewhere")), Pack: packed.Pack.String(),
			Offset: math.MaxInt64 - 8, Size: 64})
	})
	if err := os.Remove(filepath.Join(st.Dir(), "index.db")); err != nil {
		t.Fatal(err)
	}
	rep, err := names.RebuildIndex(context.Background(), st.Dir(), store.Options{}, 2)
	if err != nil || !rep.OK {
		t.Fatalf("rebuild: %+v, %v", rep, err)
	}
	st, err = store.Open(st.Dir(), false, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	storetest.Fsck(t, st, store.FsckOptions{})
	storetest.RequireCheckout(t, st, "m", v1)
}

// oneVersion is a new store (in a temp folder) holding a version of
// storetest's variant v1 as m.
func oneVersion(t *testing.T) (*store.Store, storetest.Model) {
	t.Helper()
	root := t.TempDir()
	st, err := store.Open(filepath.Join(root, "store"), true, store.Options{LockTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	v1 := storetest.Variant(t, root, "v1", 1)
	storetest.Add(t, st, v1, "m")
	return st, v1
}

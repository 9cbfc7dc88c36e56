package refs

import (
	"bytes"
	"errors"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// openDB opens a fresh bbolt database in a temp directory, with refs'
// buckets created. NoSync keeps the many small transactions of the tests fast;
// durability is bbolt's business, not refs'.
func openDB(t testing.TB) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "index.db"), 0o600, &bolt.Options{Timeout: time.Second, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	update(t, db, Init)
	return db
}

func update(t testing.TB, db *bolt.DB, fn func(tx *bolt.Tx) error) {
	t.Helper()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

func view(t testing.TB, db *bolt.DB, fn func(tx *bolt.Tx) error) {
	t.Helper()
	if err := db.View(fn); err != nil {
		t.Fatal(err)
	}
}

// dig returns a distinct digest for each n.
func dig(n int) objects.Digest { return objects.Sum([]byte{byte(n), byte(n >> 8), 'x'}) }

// hexDigest builds a digest whose hex form starts with prefix and continues
// with fill.
func hexDigest(t testing.TB, prefix string, fill byte) objects.Digest {
	t.Helper()
	s := prefix + strings.Repeat(string(fill), 64-len(prefix))
	d, err := objects.ParseDigest(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)

func move(t testing.TB, db *bolt.DB, name string, d objects.Digest, msg string) Entry {
	t.Helper()
	var e Entry
	update(t, db, func(tx *bolt.Tx) error {
		var err error
		e, err = Move(tx, name, d, msg, t0.Add(time.Duration(len(msg))*time.Second))
		return err
	})
	return e
}

func tag(t testing.TB, db *bolt.DB, name, tg string, d objects.Digest) {
	t.Helper()
	update(t, db, func(tx *bolt.Tx) error {
		_, err := Tag(tx, name, tg, d)
		return err
	})
}

// wantClass fails unless err has class c and its message contains every
// fragment.
func wantClass(t testing.TB, err error, c errs.Class, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", c.Key())
	}
	if !errors.Is(err, c) {
		t.Fatalf("got %v, want class %s", err, c.Key())
	}
	if !strings.HasPrefix(err.Error(), "refs: ") {
		t.Errorf("message %q lacks the package prefix", err)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("message %q lacks %q", err, f)
		}
	}
}

// fakeManifests is a ManifestIndex over a fixed set of digests.
type fakeManifests []objects.Digest

func (m fakeManifests) HasManifest(d objects.Digest) bool {
	for _, x := range m {
		if x == d {
			return true
		}
	}
	return false
}

func (m fakeManifests) ManifestsWithPrefix(prefix string) []objects.Digest {
	var out []objects.Digest
	for _, x := range m {
		if strings.HasPrefix(x.String(), prefix) {
			out = append(out, x)
		}
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i][:], out[j][:]) < 0 })
	return out
}

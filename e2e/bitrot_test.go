package e2e

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
)

// TestBitRot flips one random bit of one random blob (loose and packed in
// turn) 200 times: each time fsck must name that blob as corrupt and exit
// with integrity_error, and a checkout of a version that needs the blob
// must refuse with integrity_error. The bit is flipped back after each
// trial.
func TestBitRot(t *testing.T) {
	t.Parallel()
	const trials = 200
	dirs, _ := crashModels(t, t.TempDir(), 3)
	c := newCLI(t)
	for i, d := range dirs {
		c.add(d, "--name", "m", "--tag", "v"+string(rune('0'+i)))
	}
	st, err := store.Open(c.store, false, store.Options{LockTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var loose, packed []store.BlobRecord
	neededBy := map[objects.Digest]string{} // blob → a tag whose version needs it
	manifests := map[objects.Digest]bool{}  // the manifests' own blobs
	err = st.View(func(tx *bolt.Tx) error {
		tags, err := refs.Tags(tx)
		if err != nil {
			return err
		}
		for _, tg := range tags {
			m, err := st.Manifest(tx, tg.Digest)
			if err != nil {
				return err
			}
			for _, b := range m.Blobs() {
				neededBy[b] = tg.Name + ":" + tg.Tag
			}
			manifests[tg.Digest] = true
		}
		return store.ForEachBlob(tx, func(r store.BlobRecord) error {
			if r.Encoding == store.EncodingRaw {
				loose = append(loose, r)
			} else {
				packed = append(packed, r)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(loose) == 0 || len(packed) == 0 {
		t.Fatalf("%d loose and %d packed blobs: want both", len(loose), len(packed))
	}

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	found := 0
	for i := range trials {
		recs, path := loose, func(r store.BlobRecord) (string, int64) { return st.BlobPath(r.Digest), 0 }
		if i%2 == 1 {
			recs, path = packed, func(r store.BlobRecord) (string, int64) { return st.PackPath(r.Pack), r.Offset }
		}
		rec := recs[rng.IntN(len(recs))]
		file, base := path(rec)
		bit := rng.Int64N(rec.Size * 8)
		flip(t, file, base+bit/8, byte(1)<<(bit%8))

		r := c.run("--json", "fsck")
		var rep fsckReport
		json.Unmarshal([]byte(r.stdout), &rep)
		if r.code == exitCodes["integrity_error"] && slices.ContainsFunc(rep.Corrupt, func(f store.Finding) bool {
			return f.Kind == "blob" && f.ID == rec.Digest.String()
		}) {
			found++
		} else {
			t.Errorf("trial %d: bit %d of blob %s (%s): fsck missed it:\n%s", i, bit, rec.Digest.Short(), filepath.Base(file), r)
		}
		// A manifest's own blob is the copy `fsck --rebuild-index` reads;
		// checkout reads the index's copy, so only fsck must see it.
		if neededBy[rec.Digest] == "" {
			if !manifests[rec.Digest] {
				t.Fatalf("blob %s: no version needs it, and it is no manifest", rec.Digest.Short())
			}
		} else if r := c.run("checkout", neededBy[rec.Digest], filepath.Join(t.TempDir(), "out")); r.code != exitCodes["integrity_error"] {
			t.Errorf("trial %d: checkout of a version whose blob %s has a flipped bit:\n%s", i, rec.Digest.Short(), r)
		}

		flip(t, file, base+bit/8, byte(1)<<(bit%8))
	}
	c.fsck()
	t.Logf("fsck found %d of %d flipped bits (%.0f%%); checkout refused all of them", found, trials, 100*float64(found)/trials)
}

// flip XORs the byte at off of path with mask.
func flip(t *testing.T, path string, off int64, mask byte) {
	t.Helper()
	os.Chmod(path, 0o644)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= mask
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

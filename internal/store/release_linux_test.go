//go:build linux

package store

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/objects"
)

// indexResident is how many bytes of the index file this process has
// mapped and resident (/proc/self/smaps).
func indexResident(t *testing.T, st *Store) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	index := filepath.Join(st.dir, indexFile)
	var total int64
	in := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-"): // a mapping's first line
			in = len(fields) == 6 && fields[5] == index
		case in && fields[0] == "Rss:":
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			total += kb << 10
		}
	}
	return total
}

// manyRecords is a new store recording 200,000 small packed blobs (an
// index of about 16 MB), and their records.
func manyRecords(t *testing.T) (*Store, []BlobRecord) {
	t.Helper()
	st := newStore(t)
	var recs []BlobRecord
	for i := range 200_000 {
		d := objects.Sum([]byte{byte(i), byte(i >> 8), byte(i >> 16), 9})
		recs = append(recs, BlobRecord{Digest: d, Size: 64, Encoding: EncodingPacked, Pack: PackID{9}, Offset: int64(i) * 64})
	}
	if err := st.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, recs) }); err != nil {
		t.Fatal(err)
	}
	return st, recs
}

// RecordsInOrder releases the index pages it has read as it goes: looking
// up a few blobs among many (each on a page of its own) keeps a bounded
// part of the index resident, not every page it passed.
func TestRecordsInOrderReleasesIndexPages(t *testing.T) {
	st, recs := manyRecords(t)
	var sparse []objects.Digest
	for i := 0; i < len(recs); i += 20 { // 10,000 look-ups, about one a page
		sparse = append(sparse, recs[i].Digest)
	}
	err := st.View(func(tx *bolt.Tx) error {
		indexBytes := tx.Size()
		got, err := RecordsInOrder(tx, sparse)
		if err != nil {
			return err
		}
		for i, r := range got {
			if r.Digest != sparse[i] {
				t.Fatalf("record %d is %s, want %s", i, r.Digest.Short(), sparse[i].Short())
			}
		}
		resident := indexResident(t, st)
		// Released every 2,048 look-ups: at most as many leaf pages, and
		// the branch pages above them, of the 4,000-odd the look-ups read.
		if bound := int64(2048+256) * 4096; resident > bound || resident > indexBytes/2 {
			t.Fatalf("%d bytes of an index of %d resident after the look-ups, want at most %d", resident, indexBytes, bound)
		}
		t.Logf("%d KB of an index of %d KB resident", resident>>10, indexBytes>>10)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fsck's reads of the whole index keep only a bounded part of it mapped:
// checkedView's read of every page, the count of the blob records, and
// bbolt's check, whose pages releasing drops from another goroutine.
func TestFsckReadsReleaseIndexPages(t *testing.T) {
	st, recs := manyRecords(t)
	// Released every releaseEvery records: about 2 MB of leaf pages, and
	// the branch pages above them.
	const bound = 4 << 20
	err := st.checkedView(func(tx *bolt.Tx, canCheck bool) error {
		indexBytes := int64(tx.Size())
		if indexBytes < 3*bound {
			t.Fatalf("an index of %d bytes: too small to tell", indexBytes)
		}
		if got := indexResident(t, st); got > bound {
			t.Errorf("%d bytes of an index of %d resident after checkedView read every page, want at most %d", got, indexBytes, bound)
		}
		if n := countKeys(tx.Bucket(bucketBlobs)); n != len(recs) {
			t.Errorf("countKeys: %d, want %d", n, len(recs))
		}
		if got := indexResident(t, st); got > bound {
			t.Errorf("%d bytes of an index of %d resident after countKeys, want at most %d", got, indexBytes, bound)
		}
		stop := releasing(tx)
		read := 0
		if err := readAll(tx, tx.Bucket(bucketBlobs), &read); err != nil {
			t.Fatal(err)
		}
		// readAll releases its own pages too: read them again, unreleased.
		var sum byte
		tx.Bucket(bucketBlobs).ForEach(func(k, v []byte) error { sum ^= k[0] ^ v[0]; return nil })
		time.Sleep(20 * releaseInterval)
		got := indexResident(t, st)
		stop()
		if got > bound {
			t.Errorf("%d bytes of an index of %d resident while releasing, want at most %d", got, indexBytes, bound)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

//go:build linux

package store

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

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

// RecordsInOrder releases the index pages it has read as it goes: looking
// up a few blobs among many (each on a page of its own) keeps a bounded
// part of the index resident, not every page it passed.
func TestRecordsInOrderReleasesIndexPages(t *testing.T) {
	st := newStore(t)
	var recs []BlobRecord
	for i := range 200_000 {
		d := objects.Sum([]byte{byte(i), byte(i >> 8), byte(i >> 16), 9})
		recs = append(recs, BlobRecord{Digest: d, Size: 64, Encoding: EncodingPacked, Pack: PackID{9}, Offset: int64(i) * 64})
	}
	if err := st.Update(func(tx *bolt.Tx) error { return RecordBlobs(tx, recs) }); err != nil {
		t.Fatal(err)
	}
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

package store

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/objects"
)

// addTinyVersion adds a version of n tensors of 16 bytes, all new to st
// (seed sets their bytes), as RecordBlobs and PutManifest leave it: no
// ref names it.
func addTinyVersion(t *testing.T, st *Store, seed, n int) {
	t.Helper()
	w := st.NewBlobWriter(nil)
	defer w.Abort()
	m := &objects.Manifest{Schema: objects.ManifestSchema, Format: "safetensors", Files: []objects.File{}, Tensors: make([]objects.Tensor, 0, n)}
	var ds []objects.Digest
	var datas [][]byte
	for i := range n {
		b := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(seed)), uint64(i))
		d := objects.Sum(b)
		m.Tensors = append(m.Tensors, objects.Tensor{Name: fmt.Sprintf("layers.%d.weight", i), DType: "U8", Shape: []int64{16}, Size: 16, Digest: d, Chunks: []objects.Digest{d}})
		ds, datas = append(ds, d), append(datas, b)
		if len(ds) == smallGroup || i == n-1 {
			if err := w.PutSmall(ds, datas); err != nil {
				t.Fatal(err)
			}
			ds, datas = nil, nil
		}
	}
	recs, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	recordVersion(t, st, m, recs)
}

// recordVersion records the blobs recs (durable) and manifest m, its blob
// written, as one version, and returns its digest.
func recordVersion(t *testing.T, st *Store, m *objects.Manifest, recs []BlobRecord) objects.Digest {
	t.Helper()
	d, enc, err := m.Digest()
	if err != nil {
		t.Fatal(err)
	}
	mrecs, err := st.WriteManifestBlob(d, enc)
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(func(tx *bolt.Tx) error {
		if err := RecordBlobs(tx, append(recs, mrecs...)); err != nil {
			return err
		}
		return PutManifest(tx, d, enc)
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// heapPeak samples the live heap (as each collection measures it) until
// stop is called, which returns the highest seen.
func heapPeak() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak
	}
}

// What fsck holds grows with the store by a compact record a blob, never
// by a decoded record or a need of every manifest at once. On a store of 8
// versions of 16,000 blobs, what it holds from its read of the index to its
// end is bounded per blob; and its live heap at its peak grows, from 2
// versions to 8, by a bounded amount per blob added (what is not per blob,
// a pack window and one manifest being read, stays, and makes the peak
// vary by 2 MB from run to run, 20 bytes a blob added). fsck holds 66
// bytes a blob (its records are 64) and its peak grows by 80-100; with a
// map of BlobRecords beside them, it held 410 and grew by 440; with every
// manifest's needs kept, 162 and 189. Not parallel: the heap is the
// process's.
func TestFsckMemoryPerBlob(t *testing.T) {
	const versions, tensors, first = 8, 16_000, 2
	st := newStore(t)
	// Collections at each tenth of growth: the live heap sampled at each
	// is within a tenth of its true peak.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	// Twice: the first leaves the pools' contents as their victims.
	gc := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	fsckPeak := func(blobs int) int64 {
		before := gc()
		stop := heapPeak()
		rep, err := st.Fsck(t.Context(), FsckOptions{Workers: 1})
		peak := int64(stop()) - int64(before)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK || rep.Blobs != blobs {
			t.Fatalf("fsck of the generated store: ok %v, %d blobs (want %d): missing %v, corrupt %v", rep.OK, rep.Blobs, blobs, rep.Missing, rep.Corrupt)
		}
		t.Logf("%d blobs: live heap at fsck's peak %.1f MB, %d bytes a blob", blobs, float64(peak)/1e6, peak/int64(blobs))
		return peak
	}
	for v := range first {
		addTinyVersion(t, st, v, tensors)
	}
	few := first * (tensors + 1) // and each manifest's own
	peakFew := fsckPeak(few)
	for v := first; v < versions; v++ {
		addTinyVersion(t, st, v, tensors)
	}
	blobs := versions * (tensors + 1)
	if grown := (fsckPeak(blobs) - peakFew) / int64(blobs-few); grown > 150 {
		t.Errorf("fsck's live heap at its peak grows by %d bytes a blob added, want at most 150", grown)
	}

	before := gc()
	r := &FsckReport{}
	state := &fsckState{reported: map[objects.Digest]bool{}, names: map[objects.Digest][]string{}}
	if err := st.checkedView(func(tx *bolt.Tx, canCheck bool) error { return st.checkIndex(tx, canCheck, r, state) }); err != nil {
		t.Fatal(err)
	}
	r.listUnreferenced(state)
	held := int64(gc()) - int64(before)
	runtime.KeepAlive(state)
	t.Logf("held from the index read on: %d bytes a blob", held/int64(blobs))
	if held > 80*int64(blobs) {
		t.Errorf("fsck holds %d bytes a blob once it has read the index, want at most 80", held/int64(blobs))
	}
}

package transfer

import (
	"bytes"
	"slices"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// A pull asks for the blobs it lacks in the order the manifest first
// names them, each once, and for no other.
func TestInManifestOrder(t *testing.T) {
	d := make([]objects.Digest, 6)
	for i := range d {
		d[i] = objects.Sum([]byte{byte(i)})
	}
	m := &objects.Manifest{
		Tensors: []objects.Tensor{{Chunks: []objects.Digest{d[3], d[1]}}, {Chunks: []objects.Digest{d[1], d[5]}}, {Chunks: []objects.Digest{d[0]}}},
		Files:   []objects.File{{Extents: []objects.Extent{{Data: &objects.Data{Chunks: []objects.Digest{d[4], d[3], d[2]}}}}}},
	}
	missing := []objects.Digest{d[0], d[1], d[2], d[3], d[5]} // d[4] is here already
	objects.SortDigests(missing)
	got := inManifestOrder(m, missing)
	want := []objects.Digest{d[3], d[1], d[5], d[0], d[2]}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

// checkBlobs catches a wrong size or a wrong byte in any blob of a batch,
// the last as well as the first, naming it.
func TestCheckBlobsEveryOne(t *testing.T) {
	var ds []objects.Digest
	var data [][]byte
	sizes := map[objects.Digest]int64{}
	for i := range 600 {
		b := bytes.Repeat([]byte{byte(i), byte(i >> 8)}, 100+i%300)
		d := objects.Sum(b)
		ds, data, sizes[d] = append(ds, d), append(data, b), int64(len(b))
	}
	if err := checkBlobs(ds, sizes, data); err != nil {
		t.Fatalf("checkBlobs of good blobs: %v", err)
	}
	for _, bad := range []int{0, 299, 599} {
		altered := slices.Clone(data)
		altered[bad] = bytes.Clone(data[bad])
		altered[bad][7] ^= 1
		err := checkBlobs(ds, sizes, altered)
		if errs.ClassOf(err) != errs.IntegrityError || !bytes.Contains([]byte(err.Error()), []byte(ds[bad].Short())) {
			t.Fatalf("blob %d altered: %v; want an integrity_error naming %s", bad, err, ds[bad].Short())
		}
		altered[bad] = data[bad][1:]
		if err := checkBlobs(ds, sizes, altered); errs.ClassOf(err) != errs.IntegrityError {
			t.Fatalf("blob %d a byte short: %v; want an integrity_error", bad, err)
		}
	}
}

// The same for a manifest of more blobs than objects.DigestOrder sorts by
// comparisons, many named more than once, against a map's answer.
func TestInManifestOrderMany(t *testing.T) {
	var m objects.Manifest
	var want []objects.Digest
	seen := map[objects.Digest]bool{}
	often := objects.Sum([]byte("often")) // named 134 times: its bucket is sorted unstably
	for i := range 20_000 {
		if i%150 == 75 {
			m.Tensors = append(m.Tensors, objects.Tensor{Chunks: []objects.Digest{often}})
			if !seen[often] {
				want = append(want, often)
			}
			seen[often] = true
		}
		d := objects.Sum([]byte{byte(i % 7001), byte(i % 7001 >> 8)}) // each named about three times
		m.Tensors = append(m.Tensors, objects.Tensor{Chunks: []objects.Digest{d}})
		if i%7001%5 != 0 && !seen[d] { // a fifth are here already
			want = append(want, d)
		}
		seen[d] = true
	}
	missing := slices.Clone(want)
	objects.SortDigests(missing)
	if got := inManifestOrder(&m, missing); !slices.Equal(got, want) {
		t.Fatalf("%d blobs in another order than the manifest's (want %d)", len(got), len(want))
	}
}

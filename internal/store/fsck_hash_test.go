package store

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/mstore/mstore/internal/objects"
)

// hashPacked gives each blob of a pack the digest hashRange gives it, or
// an error where its bytes run past the file's end: blobs side by side,
// apart, overlapping, larger than the window, and cut short at the end.
func TestHashPackedIsHashRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 3*packWindow+12345)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	path := filepath.Join(t.TempDir(), "p.pack")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()

	type blob struct{ off, size int64 }
	var blobs []blob
	for off := int64(0); off < int64(len(data)); {
		size := int64(rng.IntN(4096))
		switch rng.IntN(20) {
		case 0:
			size = packWindow + int64(rng.IntN(1000)) // read on its own
		case 1:
			size = packWindow // exactly the window
		}
		blobs = append(blobs, blob{off, size})
		switch rng.IntN(4) {
		case 0:
			off += size + int64(rng.IntN(5000)) // a gap
		case 1:
			off += size / 2 // overlapping the next
		default:
			off += size
		}
	}
	last := blobs[len(blobs)-1]
	blobs = append(blobs, blob{last.off, int64(len(data)) - last.off + 10}) // past the end
	n := 0
	hashPacked(file, len(blobs), func(i int) (int64, int64) { return blobs[i].off, blobs[i].size },
		func(i int, got objects.Digest, err error) {
			if i != n {
				t.Fatalf("blob %d reported after %d", i, n-1)
			}
			n++
			b := blobs[i]
			want, wantErr := hashRange(file, b.off, b.size)
			if (err != nil) != (wantErr != nil) || err == nil && got != want {
				t.Fatalf("blob %d (%d bytes at %d): %s, %v; hashRange: %s, %v", i, b.size, b.off, got.Short(), err, want.Short(), wantErr)
			}
			if err == nil && got != objects.Sum(data[b.off:b.off+b.size]) {
				t.Fatalf("blob %d: digest of other bytes", i)
			}
		})
	if n != len(blobs) {
		t.Fatalf("%d of %d blobs reported", n, len(blobs))
	}
}

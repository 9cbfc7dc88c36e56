package restorer

import (
	"errors"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// A wrong blob is refused wherever it falls in blobCheck's groups of
// eight, the last, partial one too; right blobs pass.
func TestBlobCheckFindsEveryMismatch(t *testing.T) {
	buf := make([]byte, 20*1100)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	blob := func(i int) []byte { return buf[i*1100 : i*1100+100+i*50] } // 100..1,000 bytes, then one of 1,050
	for n := 1; n <= 20; n++ {
		for bad := -1; bad < n; bad++ {
			var c blobCheck
			var err error
			for i := 0; i < n && err == nil; i++ {
				want := objects.Sum(blob(i))
				if i == bad {
					want[0] ^= 1
				}
				err = c.add(blob(i), want)
			}
			if err == nil {
				err = c.flush()
			}
			if bad < 0 && err != nil {
				t.Fatalf("%d right blobs: %v", n, err)
			}
			if bad >= 0 && !errors.Is(err, errs.IntegrityError) {
				t.Fatalf("blob %d of %d wrong: err = %v, want integrity_error", bad, n, err)
			}
		}
	}
}

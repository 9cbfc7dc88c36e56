package pytorch

import (
	"os"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/modeldir"
)

// TestMeasureParse times Parse over the checkpoints named by
// MSTORE_PYTORCH_BENCH (a directory), which a developer generates; it is
// skipped otherwise.
func TestMeasureParse(t *testing.T) {
	dir := os.Getenv("MSTORE_PYTORCH_BENCH")
	if dir == "" {
		t.Skip("set MSTORE_PYTORCH_BENCH to a directory of large checkpoints to time Parse") // choice: an opt-in measurement
	}
	d, err := modeldir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, p := range d.SortedFiles(Codec.Claims) {
		start := time.Now()
		l, err := Codec.Parse(d, []string{p})
		if err != nil {
			t.Fatal(err)
		}
		el := time.Since(start)
		t.Logf("%s: %d bytes, %d tensors parsed in %v (%.0f MB/s)", p, l.Files[0].Size, len(l.Tensors), el, float64(l.Files[0].Size)/el.Seconds()/1e6)
	}
}

package e2e

import (
	"path/filepath"
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/testmodel"
)

// castPeak bounds `checkout --dtype f32` of a 96 MiB F16 tensor (192 MiB
// once cast). It held the tensor, its cast and the collector's headroom
// at once, over 300 MiB; cast a chunk at a time, 100-140 MiB.
const castPeak = 200 << 20

// TestMemoryCastOfALargeTensor checks out a model of one large F16 tensor
// cast to F32, under GNU time: a cast holds a few chunks of the tensor,
// not the tensor and all it makes of it.
func TestMemoryCastOfALargeTensor(t *testing.T) {
	if testing.Short() {
		t.Skip("a 96 MiB model, added and cast to a 192 MiB one (about 3 s)")
	}
	model := filepath.Join(t.TempDir(), "large")
	tensors := []formats.Tensor{{Name: "embed.weight", DType: "F16", Shape: []int64{48 << 20}, Size: 96 << 20}}
	if err := testmodel.WriteTensors(model, tensors, 0, 3); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t)
	c.ok("add", model, "--name", "m", "--quiet")
	r, peak := c.limited("checkout", "m", filepath.Join(t.TempDir(), "out"), "--dtype", "f32", "--quiet")
	t.Logf("checkout --dtype f32: peak RSS %d MiB", peak>>20)
	if r.code != 0 {
		t.Fatalf("checkout --dtype f32 failed:\n%s", r)
	}
	if peak > castPeak {
		t.Errorf("checkout --dtype f32: peak RSS %d MiB, want at most %d MiB", peak>>20, castPeak>>20)
	}
}

package npz_test

import (
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/npz"
)

func replan(parsed *formats.Layout) (*formats.Layout, error) {
	return npz.Plan(parsed.Tensors, "model")
}

// The conformance suite, on files numpy wrote (.npy v1, v2 and v3 in both
// orders, a stored .npz of every dtype) and on what Plan writes.
func TestConformance(t *testing.T) {
	dir := t.TempDir()
	numpyRun(t, dir, `
a = np.arange(12, dtype='<f4').reshape(3, 4)
np.save('c.npy', a)
for v in [(1, 0), (2, 0), (3, 0)]:
    with open('f%d.npy' % v[0], 'wb') as f:
        np.lib.format.write_array(f, np.asfortranarray(a.astype('>i8')), version=v)
np.savez('mixed.npz', a=a, b=np.array([True, False]), s=np.array(['xy', 'z']), t=np.arange(3).astype('<M8[s]'), e=np.zeros((0, 2)))
`)
	all := readDir(t, dir)
	gen, err := planned("w")
	if err != nil {
		t.Fatal(err)
	}
	var samples []formattest.Sample
	for _, p := range []string{"c.npy", "f1.npy", "f2.npy", "f3.npy", "mixed.npz"} {
		samples = append(samples, formattest.Sample{Name: p, Files: map[string][]byte{p: all[p]}})
	}
	samples = append(samples, formattest.Sample{Name: "planned", Files: gen},
		formattest.Sample{Name: "npy-beside-npz", Files: map[string][]byte{"sub/c.npy": all["c.npy"], "model.npz": gen["model.npz"]}})
	// Bounded mutations: seven small samples, each file a few hundred bytes.
	formattest.Suite{Codec: npz.Codec, Samples: samples, Replan: replan, MaxTruncations: 256, MaxBitFlips: 1024}.Run(t)
}

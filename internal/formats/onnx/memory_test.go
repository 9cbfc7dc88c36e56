package onnx

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
)

// manyInitializers is a model of n empty FLOAT initializers held in
// raw_data (so that each is a tensor extent), about 20 bytes each.
func manyInitializers(n int) []byte {
	inits := make([]msg, n)
	for i := range inits {
		inits[i] = rawTensor(fmt.Sprintf("t%06d", i), 1, nil, 0)
	}
	return modelMsg(graphMsg(inits...))
}

// TestMemoryBudget parses a 4 MB model of 200,000 initializers under a
// memory limit: it is read at a peak RSS proportional to its size, and
// with a small --max-parse-memory refused, naming the flag.
func TestMemoryBudget(t *testing.T) {
	n, limit := 200_000, int64(16<<20)
	if formattest.RaceEnabled { // ten times slower: a tenth of the initializers, and of the cap
		n, limit = 20_000, 1<<20
	}
	for _, c := range []struct {
		name    string
		limit   int64
		class   string
		maxPeak int64
	}{
		{"200,000 initializers", 0, "", 300 << 20},
		{"200,000 initializers under a 16MiB cap", limit, errs.SizeLimitExceeded.Key(), 150 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := formattest.UnderMemoryLimit(t, 2<<30, func() error {
				files := map[string][]byte{"m.onnx": manyInitializers(n)}
				codec := Codec
				if c.limit > 0 {
					codec = Codec.(formats.Limited).WithLimits(formats.Limits{MaxParseMemory: c.limit})
				}
				_, err := codec.Parse(formattest.NewMemDir(files), []string{"m.onnx"})
				return err
			})
			t.Logf("%s", r)
			if r.Crashed || r.Class != c.class {
				t.Fatalf("want %q, got %s", c.class, r)
			}
			if c.class != "" && !strings.Contains(r.Message, fmt.Sprintf("--max-parse-memory %dMiB", limit>>20)) {
				t.Errorf("message does not name the flag and its value: %s", r.Message)
			}
			if r.PeakRSS > c.maxPeak {
				t.Errorf("peak RSS %d MiB, want at most %d MiB", r.PeakRSS>>20, c.maxPeak>>20)
			}
		})
	}
}

// TestNestedScopesCharged: 30 If nodes nested through their then_branch,
// each named with 256 KiB: every subgraph's scope spells all the names
// above it (116 MiB in all from 7.5 MiB of protobuf), and that is charged.
func TestNestedScopesCharged(t *testing.T) {
	g := graphMsg(rawTensor("w", 1, f32(1), 1))
	for i := range 30 {
		g = graphMsg().sub(graphNode, ifNode(fmt.Sprintf("%0262144d", i), g))
	}
	files := map[string][]byte{"m.onnx": modelMsg(g)}
	for _, c := range []struct {
		limit int64
		class errs.Class
	}{{0, 0}, {64 << 20, errs.SizeLimitExceeded}} {
		_, err := Codec.(formats.Limited).WithLimits(formats.Limits{MaxParseMemory: c.limit}).Parse(formattest.NewMemDir(files), []string{"m.onnx"})
		if errs.ClassOf(err) != c.class {
			t.Errorf("cap %d: %v, want class %v", c.limit, err, c.class)
		}
	}
}

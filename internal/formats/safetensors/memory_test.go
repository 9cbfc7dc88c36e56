package safetensors

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
)

// emptyTensorsHeader is a header of n empty tensors whose names are
// nameLen bytes long.
func emptyTensorsHeader(n, nameLen int) string {
	var b strings.Builder
	b.WriteByte('{')
	pad := strings.Repeat("n", max(nameLen-8, 0))
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%s%08d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}`, pad, i)
	}
	b.WriteByte('}')
	return b.String()
}

// TestMemoryBudget parses headers of many empty tensors under a memory
// limit: a header of 400,000 is read at a peak RSS proportional to its
// 23 MB; with a small --max-parse-memory it is refused, naming the flag.
func TestMemoryBudget(t *testing.T) {
	n, limit := 400_000, int64(32<<20)
	if formattest.RaceEnabled { // ten times slower: a tenth of the tensors, and of the cap
		n, limit = 40_000, 2<<20
	}
	for _, c := range []struct {
		name    string
		n       int
		limit   int64 // --max-parse-memory; 0 for the default
		class   string
		maxPeak int64
	}{
		{"400,000 empty tensors", n, 0, "", 300 << 20},
		{"400,000 empty tensors under a 32MiB cap", n, limit, errs.SizeLimitExceeded.Key(), 150 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := formattest.UnderMemoryLimit(t, 2<<30, func() error {
				files := map[string][]byte{"m.safetensors": rawFile(emptyTensorsHeader(c.n, 12), nil)}
				codec := Codec.(formats.Limited).WithLimits(formats.Limits{MaxParseMemory: c.limit})
				_, err := codec.Parse(formattest.NewMemDir(files), []string{"m.safetensors"})
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

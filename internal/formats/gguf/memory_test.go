package gguf

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
)

// byteArrayGGUF is a GGUF v3 file with one F32 tensor and a u8 array
// key/value of n elements.
func byteArrayGGUF(n int) []byte {
	le := binary.LittleEndian
	str := func(b []byte, s string) []byte { return append(le.AppendUint64(b, uint64(len(s))), s...) }
	b := le.AppendUint32([]byte(Magic), 3)
	b = le.AppendUint64(le.AppendUint64(b, 1), 2)
	b = le.AppendUint32(str(b, "general.architecture"), uint32(TypeString))
	b = str(b, "llama")
	b = le.AppendUint32(str(b, "x.blob"), uint32(TypeArray))
	b = le.AppendUint64(le.AppendUint32(b, uint32(TypeUint8)), uint64(n))
	for i := range n {
		b = append(b, byte(i))
	}
	b = le.AppendUint32(str(b, "t"), 1)                               // one dimension
	b = le.AppendUint64(le.AppendUint32(le.AppendUint64(b, 4), 0), 0) // 4 elements, F32, offset 0
	for len(b)%DefaultAlignment != 0 {
		b = append(b, 0)
	}
	return append(b, make([]byte, 16)...)
}

// TestMemoryBudget reads a GGUF whose one key/value is a 16 MB byte array
// under a memory limit: parsing it and decoding its key/values from the
// manifest (as show and diff do) stay proportional to its size, and a
// small --max-parse-memory refuses it, naming the flag.
func TestMemoryBudget(t *testing.T) {
	// At 30 MB, show took 3.5 GB before DecodeKVs walked arrays in place.
	n, limit := 16_000_000, int64(64<<20)
	if raceEnabled { // ten times slower: an eighth of the elements, and of the cap
		n, limit = 2_000_000, 8<<20
	}
	parse := func(limit int64) (*formats.Layout, error) {
		files := map[string][]byte{"m.gguf": byteArrayGGUF(n)}
		return Codec.(formats.Limited).WithLimits(formats.Limits{MaxParseMemory: limit}).Parse(formattest.NewMemDir(files), []string{"m.gguf"})
	}
	for _, c := range []struct {
		name    string
		run     func() error
		class   string
		maxPeak int64
	}{
		{"parse", func() error { _, err := parse(0); return err }, "", 300 << 20},
		{"parse under a cap", func() error { _, err := parse(limit); return err }, errs.SizeLimitExceeded.Key(), 300 << 20},
		{"decode the key/values", func() error {
			l, err := parse(0)
			if err != nil {
				return err
			}
			meta := []byte(l.Files[0].Meta[MetaKV])
			l = nil
			kvs, err := DecodeKVs(meta)
			if err == nil && (len(kvs) != 2 || kvs[1].Value.Len() != n) {
				t.Errorf("decoded %d key/values, want 2 with %d elements in the second", len(kvs), n)
			}
			return err
		}, "", 500 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := formattest.UnderMemoryLimit(t, 3<<30, c.run)
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

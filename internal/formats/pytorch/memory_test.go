package pytorch

import (
	"strings"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats/formattest"
)

// memoryLimit is the address space the hostile inputs below are parsed
// in: far below what they would build unbounded (gigabytes), far above
// what the budget lets them build.
const memoryLimit = 3 << 30

// maxPeakRSS is what a refused parse may have reached: the test binary,
// the input and at most the budget's base.
const maxPeakRSS = 200 << 20

// tupleKeyPickle is a dict whose one key is a tuple that holds, through
// nested tuples shared by the memo, one 64 KiB string 8^7 (2M) times:
// 64 KiB of pickle, 128 GiB once the key is spelled out.
func tupleKeyPickle() []byte {
	const fan, levels = 8, 7
	p := newPickle().dict()
	for range levels {
		p.op(opMark)
	}
	p.str(strings.Repeat("k", 64<<10)).op(opBinPut, 0)
	for l := range levels {
		for range fan - 1 {
			p.op(opBinGet, byte(l))
		}
		p.op(opTuple, opBinPut, byte(l+1))
	}
	p.rebuild("FloatStorage", "0", 4, 0, []int64{4}, []int64{1})
	return p.end()
}

// sharedDictPickle is a state dict whose levels each hold the level below
// twice (through the memo) under two keys of keyLen bytes: 2^levels tensor
// names, each levels × keyLen bytes long, all one tensor.
func sharedDictPickle(levels, keyLen int) []byte {
	p := newPickle()
	var level func(l int)
	level = func(l int) {
		if l == 0 {
			p.op(opEmptyDict).str("w")
			p.rebuild("FloatStorage", "0", 4, 0, []int64{4}, []int64{1})
			p.op(opSetItem, opBinPut, 0)
			return
		}
		p.op(opEmptyDict, opMark).str(strings.Repeat("a", keyLen))
		level(l - 1)
		p.str(strings.Repeat("b", keyLen)).op(opBinGet, byte(l-1), opSetItems, opBinPut, byte(l))
	}
	level(levels)
	return p.stop()
}

// TestMemoryBudget parses checkpoints that are small on disk and huge once
// built, under a memory limit: each is refused with size_limit_exceeded
// naming the budget and its flag, at a small peak RSS.
func TestMemoryBudget(t *testing.T) {
	for _, c := range []struct {
		name string
		pkl  func() []byte
	}{
		{"tuple key sharing a string", tupleKeyPickle},
		{"memo-shared layout with long keys", func() []byte { return sharedDictPickle(20, 16<<10) }},
		{"a million views", func() []byte { return sharedDictPickle(20, 1) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := formattest.UnderMemoryLimit(t, memoryLimit, func() error {
				files := map[string][]byte{"m.pt": checkpointOf(c.pkl(), map[string][]byte{"0": f32(4)})}
				_, err := Codec.Parse(formattest.NewMemDir(files), []string{"m.pt"})
				return err
			})
			t.Logf("%s", r)
			if r.Crashed || r.Class != errs.SizeLimitExceeded.Key() {
				t.Fatalf("want size_limit_exceeded, got %s", r)
			}
			if !strings.Contains(r.Message, "--max-parse-memory") || !strings.Contains(r.Message, "budget") {
				t.Errorf("message names neither the budget nor its flag: %s", r.Message)
			}
			if r.PeakRSS > maxPeakRSS {
				t.Errorf("peak RSS %d MiB, want at most %d MiB", r.PeakRSS>>20, maxPeakRSS>>20)
			}
		})
	}
}

// TestSetOfSharedTuples: a set whose thousand items are one memo-shared
// tuple of 2M short strings. Each item is spelled out to be hashed; the
// spellings are charged, so the parse stops after a few instead of copying
// gigabytes a thousand times.
func TestSetOfSharedTuples(t *testing.T) {
	const fan, levels = 8, 7
	p := newPickle().global("builtins", "set").op(opMark, opEmptyList)
	for range levels {
		p.op(opMark)
	}
	p.str("s").op(opBinPut, 0)
	for l := range levels {
		for range fan - 1 {
			p.op(opBinGet, byte(l))
		}
		p.op(opTuple, opBinPut, byte(l+1))
	}
	p.op(opAppend, opMark)
	for range 999 {
		p.op(opBinGet, byte(levels))
	}
	p.op(opAppends, opTuple, opReduce)
	files := map[string][]byte{"m.pt": checkpointOf(p.stop(), map[string][]byte{"0": f32(4)})}
	start := time.Now()
	_, err := Codec.Parse(formattest.NewMemDir(files), []string{"m.pt"})
	wantClass(t, err, errs.SizeLimitExceeded, "--max-parse-memory")
	t.Logf("refused in %v", time.Since(start))
}

package formats

import (
	"fmt"

	"github.com/mstore/mstore/internal/errs"
)

// The parse budget: a parse may build BudgetPerInputByte bytes (names,
// keys, values, views, tensor records) for every byte of metadata it reads,
// plus BudgetBase, and never more than Limits.MaxParseMemory. Counts alone
// (tensors, nodes) do not bound memory: a pickle memo or a JSON header can
// make one small input expand to gigabytes of names or keys.
const (
	BudgetPerInputByte = 32
	BudgetBase         = 64 << 20
	// DefaultMaxParseMemory is the ceiling when --max-parse-memory is not
	// given.
	DefaultMaxParseMemory = 4 << 30
	// ParseMemoryFlag is the add flag that sets Limits.MaxParseMemory.
	ParseMemoryFlag = "--max-parse-memory"
)

// Budget is the memory one parse may build, charged as it builds. It is
// not safe for concurrent use.
type Budget struct {
	pkg, path   string
	input       int64
	limit, used int64
	ceiling     int64
	fromFlag    bool
}

// Budget returns the budget of a parse by package pkg of path, which reads
// input bytes of metadata (a header, a pickle, a protobuf).
func (l Limits) Budget(pkg, path string, input int64) *Budget {
	b := &Budget{pkg: pkg, path: path, input: max(input, 0), ceiling: DefaultMaxParseMemory}
	if l.MaxParseMemory > 0 {
		b.ceiling, b.fromFlag = l.MaxParseMemory, true
	}
	b.setLimit()
	return b
}

func (b *Budget) setLimit() {
	b.limit = b.ceiling
	if b.input < (b.ceiling-BudgetBase)/BudgetPerInputByte {
		b.limit = min(b.ceiling, b.input*BudgetPerInputByte+BudgetBase)
	}
}

// ReadTo tells a budget made before the input's size was known (a
// streamed header) that n bytes have been read in all: the budget grows
// with them.
func (b *Budget) ReadTo(n int64) {
	if b != nil && n > b.input {
		b.input = n
		b.setLimit()
	}
}

// Charge records n more bytes built, or fails with size_limit_exceeded,
// naming the limit and what sets it, once the total passes the budget. A
// nil Budget charges nothing.
func (b *Budget) Charge(n int64) error {
	if b == nil {
		return nil
	}
	if b.used += n; b.used <= b.limit && n >= 0 {
		return nil
	}
	ceiling := fmt.Sprintf("at most %s, default %s", ParseMemoryFlag, humanSize(DefaultMaxParseMemory))
	if b.fromFlag {
		ceiling = fmt.Sprintf("at most %s %s", ParseMemoryFlag, humanSize(b.ceiling))
	}
	return errs.At(errs.SizeLimitExceeded, b.pkg, b.path, -1,
		"what %s of metadata makes the parser build (names, keys, values, views) passes its memory budget of %s (%d × the input + %s, %s); if the file is genuine, raise %s",
		humanSize(b.input), humanSize(b.limit), BudgetPerInputByte, humanSize(BudgetBase), ceiling, ParseMemoryFlag)
}

// ChargeString charges a string's bytes and its header.
func (b *Budget) ChargeString(s string) error { return b.Charge(int64(len(s)) + 16) }

// Used is what has been charged so far.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used
}

// Limit is the budget's size in bytes.
func (b *Budget) Limit() int64 { return b.limit }

func humanSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

package formats

import (
	"errors"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
)

func TestBudget(t *testing.T) {
	b := Limits{}.Budget("x", "m.bin", 1000)
	if want := int64(1000*BudgetPerInputByte + BudgetBase); b.Limit() != want {
		t.Fatalf("limit %d, want %d", b.Limit(), want)
	}
	if err := b.Charge(b.Limit()); err != nil {
		t.Fatalf("charging the whole budget: %v", err)
	}
	err := b.Charge(1)
	if !errors.Is(err, errs.SizeLimitExceeded) {
		t.Fatalf("one byte over: %v, want size_limit_exceeded", err)
	}
	for _, want := range []string{"m.bin", ParseMemoryFlag, "default 4GiB", "budget"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}

	capped := Limits{MaxParseMemory: 1 << 20}.Budget("x", "m.bin", 1<<30)
	if capped.Limit() != 1<<20 {
		t.Errorf("capped limit %d, want 1 MiB", capped.Limit())
	}
	if err := capped.Charge(2 << 20); err == nil || !strings.Contains(err.Error(), ParseMemoryFlag+" 1MiB") {
		t.Errorf("over the cap: %v, want it to name %s 1MiB", err, ParseMemoryFlag)
	}

	huge := Limits{}.Budget("x", "m.bin", 1<<62) // no overflow: the ceiling
	if huge.Limit() != DefaultMaxParseMemory {
		t.Errorf("limit of a huge input %d, want the ceiling", huge.Limit())
	}

	grow := Limits{}.Budget("x", "m.gguf", 0)
	grow.ReadTo(10 << 20)
	if want := int64(10<<20*BudgetPerInputByte + BudgetBase); grow.Limit() != want {
		t.Errorf("after ReadTo the limit is %d, want %d", grow.Limit(), want)
	}
	grow.ReadTo(1) // never shrinks
	if grow.Limit() < BudgetBase+1 {
		t.Error("ReadTo shrank the budget")
	}

	var none *Budget
	if none.Charge(1<<40) != nil || none.Used() != 0 {
		t.Error("a nil budget charges")
	}
	if Limits.Budget(Limits{}, "x", "m", 0).Charge(-1) == nil {
		t.Error("a negative charge is accepted")
	}
}

package mpk_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/mpk"
	"github.com/mstore/mstore/internal/formats/mpk/mpktest"
)

// TestParseBudget: the members an archive makes the loader keep are
// charged to the parse budget; a cap below them refuses the archive with
// size_limit_exceeded naming --max-parse-memory, and without the cap it
// gets as far as the contract check.
func TestParseBudget(t *testing.T) {
	var entries []mpktest.Entry
	for i := range 1000 {
		entries = append(entries, mpktest.File(fmt.Sprintf("lib%s%04d.so", strings.Repeat("x", 80), i), []byte{1}))
	}
	archive := mpktest.Gzip(mpktest.Tar(entries, mpktest.TarOptions{}))
	_, err := mpk.Load(bytes.NewReader(archive), mpk.Options{Limits: formats.Limits{MaxParseMemory: 64 << 10}})
	if !errors.Is(err, errs.SizeLimitExceeded) || !strings.Contains(err.Error(), "--max-parse-memory 64KiB") {
		t.Fatalf("under a 64KiB cap: %v, want size_limit_exceeded naming the flag", err)
	}
	_, err = mpk.Load(bytes.NewReader(archive), mpk.Options{})
	if err == nil || errors.Is(err, errs.SizeLimitExceeded) {
		t.Fatalf("without a cap: %v, want the missing contract refused", err)
	}
}

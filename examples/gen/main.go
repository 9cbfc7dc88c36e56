// Command gen writes the example model in examples/tiny (run from the
// repository root: go run ./examples/gen). The files are deterministic;
// internal/testmodel's tests check that the committed ones match.
package main

import (
	"fmt"
	"os"

	"github.com/mstore/mstore/internal/testmodel"
)

func main() {
	files, err := testmodel.Tiny.Build()
	if err == nil {
		err = testmodel.Write("examples/tiny", files)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

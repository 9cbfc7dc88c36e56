package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/formats"
)

// parseMemoryFlag caps what every codec may build from the metadata it
// reads (formats.Budget): 32 bytes per byte read plus 64 MiB, at most this.
var parseMemoryFlag = &cli.StringFlag{Name: strings.TrimPrefix(formats.ParseMemoryFlag, "--"),
	Usage: fmt.Sprintf("refuse a model whose headers make the parser build more than this (default %dGiB; the budget is also at most %d bytes per byte of header plus %dMiB)",
		formats.DefaultMaxParseMemory>>30, formats.BudgetPerInputByte, formats.BudgetBase>>20)}

// addLimits reads add's --max-archive-bytes, --max-entries,
// --max-entry-bytes and --max-json-depth (the bounds on what MPK accepts)
// and --max-parse-memory (every codec's parse budget). A flag left out
// keeps the codec's default.
func addLimits(c *cli.Context) (formats.Limits, error) {
	var l formats.Limits
	var err error
	for flag, to := range map[string]*int64{"max-archive-bytes": &l.MaxArchiveBytes, "max-entry-bytes": &l.MaxEntryBytes, parseMemoryFlag.Name: &l.MaxParseMemory} {
		if s := c.String(flag); s != "" {
			if *to, err = parseSize(s); err != nil {
				return l, err
			}
		}
	}
	if c.IsSet("max-entries") {
		if l.MaxEntries = c.Int64("max-entries"); l.MaxEntries <= 0 {
			return l, usageError("--max-entries must be positive")
		}
	}
	if c.IsSet("max-json-depth") {
		if l.MaxJSONDepth = c.Int("max-json-depth"); l.MaxJSONDepth <= 0 {
			return l, usageError("--max-json-depth must be positive")
		}
	}
	return l, nil
}

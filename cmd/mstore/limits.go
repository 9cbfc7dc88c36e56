package main

import (
	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/formats"
)

// addLimits reads add's --max-archive-bytes, --max-entries,
// --max-entry-bytes and --max-json-depth (the bounds on what a codec that
// takes limits, MPK, accepts). A flag left out keeps the codec's default.
func addLimits(c *cli.Context) (formats.Limits, error) {
	var l formats.Limits
	var err error
	for flag, to := range map[string]*int64{"max-archive-bytes": &l.MaxArchiveBytes, "max-entry-bytes": &l.MaxEntryBytes} {
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

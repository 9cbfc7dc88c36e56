package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/codecs"
	"github.com/mstore/mstore/internal/formats"
)

// parseMemoryFlag caps what every codec may build from the metadata it
// reads (formats.Budget): 32 bytes per byte read plus 64 MiB, at most this.
var parseMemoryFlag = &cli.StringFlag{Name: strings.TrimPrefix(formats.ParseMemoryFlag, "--"),
	Usage: fmt.Sprintf("refuse a model whose headers make the parser build more than this (default %dGiB; the budget is also at most %d bytes per byte of header plus %dMiB)",
		formats.DefaultMaxParseMemory>>30, formats.BudgetPerInputByte, formats.BudgetBase>>20)}

// codecLimitFlags are the flags of the codecs' own limits (MPK's
// --max-archive-bytes, …), as the codecs declare them.
func codecLimitFlags() []cli.Flag {
	var out []cli.Flag
	for _, f := range codecs.LimitFlags() {
		if f.Size {
			out = append(out, &cli.StringFlag{Name: f.Name, Usage: f.Usage})
		} else {
			out = append(out, &cli.Int64Flag{Name: f.Name, Usage: f.Usage})
		}
	}
	return out
}

// addLimits reads --max-parse-memory (every codec's parse budget) and the
// codecs' own limit flags. A flag left out keeps the codec's default.
func addLimits(c *cli.Context) (formats.Limits, error) {
	l := formats.Limits{Codec: map[string]int64{}}
	var err error
	if s := c.String(parseMemoryFlag.Name); s != "" {
		if l.MaxParseMemory, err = parseSize(s); err != nil {
			return l, err
		}
	}
	for _, f := range codecs.LimitFlags() {
		if !c.IsSet(f.Name) {
			continue
		}
		var v int64
		if f.Size {
			if v, err = parseSize(c.String(f.Name)); err != nil {
				return l, err
			}
		} else if v = c.Int64(f.Name); v <= 0 {
			return l, usageError("--%s must be positive", f.Name)
		}
		l.Codec[f.Name] = v
	}
	return l, nil
}

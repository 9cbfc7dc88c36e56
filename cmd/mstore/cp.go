package main

import (
	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/refs"
)

var cpCommand = &cli.Command{
	Name:      "cp",
	Usage:     "make a new ref at the version SRC names, with a history of its own (the bytes are shared, nothing is copied)",
	ArgsUsage: "SRC NEWNAME",
	Action: func(c *cli.Context) error {
		e, st, err := withStore(c, 2, "SRC NEWNAME")
		if err != nil {
			return err
		}
		src, to := c.Args().Get(0), c.Args().Get(1)
		if _, err := refs.ParseName(to); err != nil {
			return err
		}
		d, err := names.Copy(st, src, to)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(map[string]any{"from": src, "name": to, "digest": d})
		}
		if e.quiet {
			e.printf("%s\n", d)
			return nil
		}
		e.printf("%s → %s (copied from %s)\n", safe(to), d, safe(src))
		return nil
	},
}

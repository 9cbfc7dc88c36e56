package main

import (
	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/refs"
)

var mvCommand = &cli.Command{
	Name:      "mv",
	Usage:     "rename a ref with its history (its tags stay with the old name: NAME:TAG never changes meaning)",
	ArgsUsage: "NAME NEWNAME",
	Action: func(c *cli.Context) error {
		e, st, err := withStore(c, 2, "NAME NEWNAME")
		if err != nil {
			return err
		}
		from, to := c.Args().Get(0), c.Args().Get(1)
		for _, n := range []string{from, to} {
			if _, err := refs.ParseName(n); err != nil {
				return err
			}
		}
		moved, err := names.Rename(st, from, to)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(map[string]any{"from": from, "name": to, "history": moved})
		}
		if e.quiet {
			return nil
		}
		e.printf("renamed %s to %s (%s)\n", safe(from), safe(to), plural(moved, "history entry"))
		return nil
	},
}

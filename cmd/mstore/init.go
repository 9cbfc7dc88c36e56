package main

import (
	"github.com/urfave/cli/v2"
)

var initCommand = &cli.Command{
	Name:      "init",
	Usage:     "create a store (add creates one on first use too)",
	ArgsUsage: "[DIR]",
	Action: func(c *cli.Context) error {
		e, err := newEnv(c)
		if err != nil {
			return err
		}
		if c.NArg() > 1 {
			return usageError("usage: mstore init [DIR]")
		}
		if c.NArg() == 1 {
			e.storeDir = c.Args().First()
		}
		st, err := e.open(true)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(map[string]string{"store": st.Dir()})
		}
		e.printf("store at %s\n", st.Dir())
		return nil
	},
}

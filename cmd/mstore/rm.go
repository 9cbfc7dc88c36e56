package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/refs"
)

var rmCommand = &cli.Command{
	Name:      "rm",
	Usage:     "remove a ref (with its history) or a tag; gc frees the bytes",
	ArgsUsage: "NAME | NAME:TAG",
	Action: func(c *cli.Context) error {
		e, err := newEnv(c)
		if err != nil {
			return err
		}
		if err := needArgs(c, 1, "NAME | NAME:TAG"); err != nil {
			return err
		}
		arg := c.Args().First()
		name, tag, isTag := strings.Cut(arg, ":")
		if _, err := refs.ParseName(name); err != nil {
			return err
		}
		st, err := e.open(false)
		if err != nil {
			return err
		}
		if err := names.Remove(st, name, tag, isTag); err != nil {
			return err
		}
		if e.json {
			return e.printJSON(map[string]string{"removed": arg})
		}
		e.printf("removed %s\n", arg)
		return nil
	},
}

package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/refs"
)

var tagCommand = &cli.Command{
	Name:      "tag",
	Usage:     "create an immutable tag NAME:TAG at a version",
	ArgsUsage: "NAME:TAG REF",
	Action: func(c *cli.Context) error {
		e, err := newEnv(c)
		if err != nil {
			return err
		}
		if err := needArgs(c, 2, "NAME:TAG REF"); err != nil {
			return err
		}
		name, tag, ok := strings.Cut(c.Args().Get(0), ":")
		if !ok {
			return usageError("%q: a tag is written NAME:TAG", c.Args().Get(0))
		}
		if _, err := refs.ParseName(name); err != nil {
			return err
		}
		if _, err := refs.ParseTag(tag); err != nil {
			return err
		}
		st, err := e.open(false)
		if err != nil {
			return err
		}
		d, err := names.Resolve(st, c.Args().Get(1))
		if err != nil {
			return err
		}
		created, err := names.Tag(st, name, tag, d)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(map[string]any{"name": name, "tag": tag, "digest": d, "created": created})
		}
		if created {
			e.printf("%s:%s → %s\n", name, tag, d)
		} else {
			e.printf("%s:%s already names %s\n", name, tag, d)
		}
		return nil
	},
}

package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/objects"
)

var addCommand = &cli.Command{
	Name:      "add",
	Usage:     "store a model (a file or a model directory) as a new version of a ref",
	ArgsUsage: "PATH",
	Flags: append([]cli.Flag{
		&cli.StringFlag{Name: "name", Usage: "the ref to move (default: PATH's base name)"},
		&cli.StringSliceFlag{Name: "tag", Usage: "also tag the new version NAME:TAG (repeat for several tags)"},
		&cli.StringFlag{Name: "message", Aliases: []string{"m"}, Usage: "a note for the ref's history"},
		&cli.StringFlag{Name: "base", Usage: "code this version's tensors, at mstore repack, as deltas against those of `REF` (default: the ref's previous version)"},
		parseMemoryFlag,
	}, codecLimitFlags()...),
	Action: func(c *cli.Context) error {
		e, err := newEnv(c)
		if err != nil {
			return err
		}
		if err := needArgs(c, 1, "PATH [--name NAME] [--tag TAG] [-m MESSAGE] [--base REF]"); err != nil {
			return err
		}
		limits, err := addLimits(c)
		if err != nil {
			return err
		}
		st, err := e.open(true)
		if err != nil {
			return err
		}
		var base objects.Digest
		if ref := c.String("base"); ref != "" {
			if base, err = names.Resolve(st, ref); err != nil {
				return err
			}
		}
		res, err := archiver.Add(c.Context, st, c.Args().First(), archiver.Options{
			Name: c.String("name"), Tags: c.StringSlice("tag"), Message: c.String("message"),
			Progress: e.progress("add"), Limits: limits,
		})
		if err != nil {
			return err
		}
		if !base.IsZero() {
			if err := st.SetDeltaBase(res.Digest, base); err != nil {
				return fmt.Errorf("add: version %s was added, but its delta base was not recorded (run the add again): %w", res.Digest, err)
			}
		}
		if e.json {
			return e.printJSON(res)
		}
		for _, w := range res.Warnings {
			e.note("warning: %s\n", safe(w))
		}
		e.result("%s\n", res.Digest)
		e.note("%s: %s, %s, %s logical, %s new (%s)\n", res.Name, plural(res.Files, "file"), plural(res.Tensors, "tensor"),
			humanBytes(res.LogicalBytes), humanBytes(res.NewBytes), plural(res.NewBlobs, "new blob"))
		return nil
	},
}

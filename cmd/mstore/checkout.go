package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/restorer"
)

var checkoutCommand = &cli.Command{
	Name:      "checkout",
	Usage:     "write a version into a directory: as added, or re-laid-out",
	ArgsUsage: "REF DEST",
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "format", Usage: "container to write (default: as added)"},
		&cli.BoolFlag{Name: "force", Usage: "replace DEST if it exists and is not empty"},
		&cli.StringSliceFlag{Name: "tensors", Usage: "only tensors whose names match this glob (repeat or comma-separate)"},
		&cli.StringFlag{Name: "max-shard-size", Usage: "re-shard SafeTensors into files of at most this size (e.g. 5GB, 500MiB)"},
	},
	Action: func(c *cli.Context) error {
		e, err := newEnv(c)
		if err != nil {
			return err
		}
		if err := needArgs(c, 2, "REF DEST [--format F] [--force] [--tensors PATTERN] [--max-shard-size SIZE]"); err != nil {
			return err
		}
		opts := restorer.Options{Format: strings.ToLower(c.String("format")), Force: c.Bool("force"),
			Tensors: c.StringSlice("tensors"), Progress: e.progress("checking out")}
		if s := c.String("max-shard-size"); s != "" {
			if opts.MaxShardSize, err = parseSize(s); err != nil {
				return err
			}
		}
		st, err := e.open(false)
		if err != nil {
			return err
		}
		d, err := resolve(st, c.Args().Get(0))
		if err != nil {
			return err
		}
		res, err := restorer.Checkout(c.Context, st, d, c.Args().Get(1), opts)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(res)
		}
		how := "byte-identical to what was added"
		if res.Relayout {
			how = "re-laid-out, parsed again and verified"
		}
		e.printf("%s → %s: %d files, %s, %s\n", res.Digest.Short(), res.Dest, res.Files, humanBytes(res.Bytes), how)
		return nil
	},
}

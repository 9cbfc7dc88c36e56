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
		&cli.StringFlag{Name: "external-data", Usage: "ONNX: move initializers into this one data file beside the .onnx file"},
		&cli.BoolFlag{Name: "inline-data", Usage: "ONNX: write every tensor inside the .onnx file (refused past 2 GB)"},
		&cli.StringFlag{Name: "size-threshold", Usage: "ONNX: initializers smaller than this stay inside the .onnx file (default 1024)"},
		&cli.StringFlag{Name: "alignment", Usage: "align tensor data to this many bytes (ONNX external data: default 4096 for tensors of 1 MiB or more)"},
	},
	Action: func(c *cli.Context) error {
		e, err := newEnv(c)
		if err != nil {
			return err
		}
		if err := needArgs(c, 2, "REF DEST [--format F] [--force] [--tensors PATTERN] [--max-shard-size SIZE] [--external-data NAME | --inline-data] [--size-threshold SIZE] [--alignment N]"); err != nil {
			return err
		}
		opts := restorer.Options{Format: strings.ToLower(c.String("format")), Force: c.Bool("force"),
			Tensors: c.StringSlice("tensors"), Progress: e.progress("checking out")}
		if s := c.String("max-shard-size"); s != "" {
			if opts.MaxShardSize, err = parseSize(s); err != nil {
				return err
			}
		}
		opts.ExternalData, opts.InlineData = c.String("external-data"), c.Bool("inline-data")
		for flag, to := range map[string]*int64{"size-threshold": &opts.SizeThreshold, "alignment": &opts.Alignment} {
			if s := c.String(flag); s != "" {
				if *to, err = parseSize(s); err != nil {
					return err
				}
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

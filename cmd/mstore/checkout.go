package main

import (
	"path"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/layouts"
	"github.com/mstore/mstore/internal/layouts/layout"
	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/restorer"
	"github.com/mstore/mstore/internal/store"
)

var checkoutCommand = &cli.Command{
	Name:      "checkout",
	Usage:     "write a version into a directory: as added, or re-laid-out",
	ArgsUsage: "REF DEST",
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "format", Usage: "container to write (default: as added)"},
		&cli.StringFlag{Name: "layout", Usage: "write into another tool's layout rooted at DEST: " + layouts.Names() + " (DEST may hold other models)"},
		&cli.BoolFlag{Name: "force", Usage: "replace DEST when it holds an earlier checkout from this store, unchanged since (nothing else is ever deleted)"},
		&cli.StringSliceFlag{Name: "tensors", Usage: "only tensors whose names match this glob (repeat or comma-separate)"},
		&cli.StringFlag{Name: "max-shard-size", Usage: "re-shard SafeTensors into files of at most this size (e.g. 5GB, 500MiB)"},
		&cli.StringFlag{Name: "external-data", Usage: "ONNX: move initializers into this one data file beside the .onnx file"},
		&cli.BoolFlag{Name: "inline-data", Usage: "ONNX: write every tensor inside the .onnx file (refused past 2 GB)"},
		&cli.StringFlag{Name: "size-threshold", Usage: "ONNX: initializers smaller than this stay inside the .onnx file (default 1024; 0 moves every tensor)"},
		&cli.StringFlag{Name: "alignment", Usage: "align tensor data to this many bytes (ONNX external data: default 4096 for tensors of 1 MiB or more)"},
		&cli.StringFlag{Name: "split-max-size", Usage: "GGUF: split as gguf-split does, at most this much tensor data per file (e.g. 2GB)"},
		&cli.IntFlag{Name: "split-max-tensors", Usage: "GGUF: split as gguf-split does, at most this many tensors per file"},
		&cli.StringFlag{Name: "dtype", Usage: "cast floating-point tensors to f16, bf16 or f32 (values the dtype cannot hold are refused)"},
		&cli.BoolFlag{Name: "clamp", Usage: "with --dtype: clamp values the dtype cannot hold to its largest finite value"},
		&cli.BoolFlag{Name: "extract", Usage: "MPK: write the archive's validated tree (etc/, lib/, share/) instead of the archive"},
		&cli.BoolFlag{Name: "drop-non-tensors", Usage: "write only the tensors, leaving out what the target cannot keep (a checkpoint's other values, an ONNX graph, GGUF key/values or SafeTensors __metadata__ into PyTorch or .npz); refused when nothing would be left out"},
	},
	Action: func(c *cli.Context) error {
		e, err := newEnv(c)
		if err != nil {
			return err
		}
		if err := needArgs(c, 2, "REF DEST [--format F] [--force] [--tensors PATTERN] [--max-shard-size SIZE] [--external-data NAME | --inline-data] [--size-threshold SIZE] [--alignment N] [--split-max-size SIZE | --split-max-tensors N] [--dtype D [--clamp]] [--extract] [--drop-non-tensors]"); err != nil {
			return err
		}
		opts := restorer.Options{Format: strings.ToLower(c.String("format")), Force: c.Bool("force"),
			WriteOptions: formats.WriteOptions{Tensors: c.StringSlice("tensors")}, Progress: e.progress("checkout")}
		if s := c.String("max-shard-size"); s != "" {
			if opts.MaxShardSize, err = parseSize(s); err != nil {
				return err
			}
		}
		opts.ExternalData, opts.InlineData = c.String("external-data"), c.Bool("inline-data")
		opts.SplitMaxTensors, opts.DType, opts.Clamp = c.Int("split-max-tensors"), c.String("dtype"), c.Bool("clamp")
		opts.DropNonTensors, opts.Extract = c.Bool("drop-non-tensors"), c.Bool("extract")
		if spec, err := refs.ParseSpec(c.Args().Get(0)); err == nil && spec.Kind != refs.KindDigest {
			opts.Name = path.Base(spec.Name) // a conversion's model name (GGUF general.name)
		}
		if opts.SplitMaxTensors < 0 {
			return usageError("--split-max-tensors must be positive")
		}
		if s := c.String("size-threshold"); s != "" {
			n := int64(0) // onnx's size_threshold=0: every tensor moves
			if strings.TrimSpace(s) != "0" {
				if n, err = parseSize(s); err != nil {
					return err
				}
			}
			opts.SizeThreshold = &n
		}
		for flag, to := range map[string]*int64{"alignment": &opts.Alignment, "split-max-size": &opts.SplitMaxSize} {
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
		if name := c.String("layout"); name != "" {
			return checkoutLayout(e, c, st, name, opts)
		}
		d, err := names.Resolve(st, c.Args().Get(0))
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
		for _, p := range res.RemovedLeftovers {
			e.note("removed %s, left by a checkout that was killed\n", p)
		}
		if res.Note != "" {
			e.note("%s\n", res.Note)
		}
		if len(res.LeftOut) > 0 {
			e.note("left out (--drop-non-tensors): %s\n", strings.Join(res.LeftOut, "; "))
		}
		how := "byte-identical to what was added"
		if res.Relayout {
			how = "re-laid-out, parsed again and verified"
		}
		switch {
		case res.Tree:
			how = "extracted as a tree, every file checked against its stored digest"
		case res.Encoded && !res.Relayout:
			how = "byte-identical to what was added, encoded canonically"
		}
		e.printf("%s → %s: %d files, %s, %s\n", res.Digest.Short(), res.Dest, res.Files, humanBytes(res.Bytes), how)
		return nil
	},
}

// checkoutLayout writes REF into the layout named at DEST: a file layout
// (a hub, a models folder) takes a restored model directory and may hold
// other models; a version layout is written whole from the store, as the
// version was added, so no format option is taken with it.
func checkoutLayout(e *env, c *cli.Context, st *store.Store, name string, opts restorer.Options) error {
	lay, err := layouts.ByName(name)
	if err != nil {
		return err
	}
	if vl, ok := lay.(layout.VersionLayout); ok {
		return exportLayout(e, c, st, vl, opts)
	}
	res, err := layouts.Checkout(c.Context, st, lay.(layout.FileLayout), c.Args().Get(0), c.Args().Get(1), opts)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(res)
	}
	e.printf("%s → %s (%s %s): %d files, %s, %d new blobs\n", res.Checkout.Digest.Short(), safe(res.Path), res.Layout,
		safe(res.Name), res.Files, humanBytes(res.Bytes), res.NewBlobs)
	return nil
}

func exportLayout(e *env, c *cli.Context, st *store.Store, vl layout.VersionLayout, opts restorer.Options) error {
	for _, f := range c.Command.Flags {
		if n := f.Names()[0]; n != "layout" && n != "force" && c.IsSet(n) {
			return usageError("--layout %s writes the version as it was added; --%s is not taken with it (check out the converted model, add it, then write that)", vl.Name(), n)
		}
	}
	d, err := names.Resolve(st, c.Args().Get(0))
	if err != nil {
		return err
	}
	o := layout.ExportOptions{Force: opts.Force, Progress: opts.Progress}
	if spec, err := refs.ParseSpec(c.Args().Get(0)); err == nil && spec.Kind != refs.KindDigest {
		o.Name, o.Tag = spec.Name, spec.Tag
	}
	res, err := vl.Export(c.Context, st, d, c.Args().Get(1), o)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(res)
	}
	e.printf("%s\n", res)
	return nil
}

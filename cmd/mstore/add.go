package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/layouts"
	"github.com/mstore/mstore/internal/layouts/layout"
	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
)

var addCommand = &cli.Command{
	Name:      "add",
	Usage:     "store a model (a file or a model directory) as a new version of a ref",
	ArgsUsage: "PATH",
	Flags: append([]cli.Flag{
		&cli.StringFlag{Name: "name", Usage: "the ref to move (default: PATH's base name)"},
		&cli.StringSliceFlag{Name: "tag", Usage: "also tag the new version NAME:TAG (repeat for several tags)"},
		&cli.StringFlag{Name: "message", Aliases: []string{"m"}, Usage: "a note for the ref's history"},
		&cli.StringFlag{Name: "only", Usage: "of a Hugging Face hub or an Ollama models folder, add only model NAME or NAME:TAG (as it would be named)"},
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
		lay := layouts.Detect(c.Args().First())
		if lay == nil && c.String("only") != "" {
			return usageError("--only goes with a Hugging Face hub or an Ollama models folder")
		}
		add := archiver.Add
		switch l := lay.(type) {
		case layout.FileLayout:
			if !base.IsZero() {
				return usageError("--base goes with a plain model; a %s add moves each ref through its own revisions", l.Name())
			}
			return addLayout(e, c, st, l, limits)
		case layout.VersionLayout:
			add = l.Import
		}
		res, err := add(c.Context, st, c.Args().First(), archiver.Options{
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
		return printAdded(e, res)
	},
}

func printAdded(e *env, res *archiver.Result) error {
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
}

// addLayout adds what another tool's layout holds at PATH (a Hugging Face
// cache snapshot, repo or hub; an Ollama manifest or models folder): one
// version per model and revision, one progress display, a summary.
func addLayout(e *env, c *cli.Context, st *store.Store, lay layout.FileLayout, limits formats.Limits) error {
	tags := c.StringSlice("tag")
	if len(tags) > 1 {
		return usageError("--tag is taken once with a %s add", lay.Name())
	}
	sum, err := layouts.Add(c.Context, st, lay, c.Args().First(), layouts.AddOptions{
		Name: c.String("name"), Tag: strings.Join(tags, ""), Message: c.String("message"), Only: c.String("only"),
		Progress: e.progress("add"), Limits: limits,
	})
	if sum == nil || err != nil && e.json {
		return err // the error says how many were not added; stdout stays empty
	}
	if len(sum.Versions) == 1 && len(sum.Failed) == 0 {
		return printAdded(e, sum.Versions[0]) // one model: add's usual output
	}
	if e.json {
		return e.printJSON(sum)
	}
	out := e.printf
	if err != nil { // what was added is said beside the error, on stderr
		out = e.note
	}
	for _, res := range sum.Versions {
		for _, w := range res.Warnings {
			e.note("warning: %s\n", safe(w))
		}
		name := res.Name
		if res.Tag != "" {
			name += ":" + res.Tag
		}
		out("%s %s\n", res.Digest, safe(name))
	}
	for _, f := range sum.Failed {
		e.note("not added: %s (%s): %s\n", safe(f.Name), safe(f.Path), safe(f.Error))
	}
	e.note("%s: %s, %s logical, %s new (%s), %s saved by dedup\n", lay.Name(), plural(len(sum.Versions), "version"),
		humanBytes(sum.LogicalBytes), humanBytes(sum.NewBytes), plural(sum.NewBlobs, "new blob"), humanBytes(sum.SavedBytes))
	return err
}

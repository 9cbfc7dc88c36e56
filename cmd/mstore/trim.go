package main

import (
	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/gc"
	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
)

var trimCommand = &cli.Command{
	Name:      "trim",
	Usage:     "drop all but the newest N entries of each ref's history, so that gc can free the versions only they named",
	ArgsUsage: "NAME... --keep N",
	Flags: []cli.Flag{
		&cli.IntFlag{Name: "keep", Usage: "history entries to keep per ref (at least 1: the current version always stays)"},
		&cli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "change nothing: say what would go and what gc would then free"},
	},
	Action: func(c *cli.Context) error {
		e, err := newEnv(c)
		if err != nil {
			return err
		}
		if c.NArg() == 0 || !c.IsSet("keep") {
			return usageError("usage: mstore trim NAME... --keep N")
		}
		keep := c.Int("keep")
		if keep < 1 {
			return usageError("--keep %d: a ref keeps at least its current version (--keep 1)", keep)
		}
		list := c.Args().Slice()
		for _, n := range list {
			if _, err := refs.ParseName(n); err != nil {
				return err
			}
		}
		st, err := e.open(false)
		if err != nil {
			return err
		}
		if c.Bool("dry-run") {
			return trimDryRun(c, e, st, list, keep)
		}
		out, err := names.Trim(st, list, keep)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(out)
		}
		for _, t := range out {
			e.printf("%s: dropped %d history entries, kept %d\n", t.Name, t.Removed, t.Kept)
		}
		if !e.quiet {
			e.note("run `mstore gc` to free the versions no name keeps any more\n")
		}
		return nil
	},
}

type trimPlan struct {
	DryRun   bool            `json:"dry_run"`
	Trims    []names.Trimmed `json:"trims"`
	Estimate *gc.Estimate    `json:"estimate"`
}

// trimDryRun says what trim would drop and what gc would then free.
func trimDryRun(c *cli.Context, e *env, st *store.Store, list []string, keep int) error {
	out := trimPlan{DryRun: true, Trims: []names.Trimmed{}}
	w := refs.Without{Keep: map[string]int{}}
	for _, n := range list {
		hist, err := names.History(st, n)
		if err != nil {
			return err
		}
		out.Trims = append(out.Trims, names.Trimmed{Name: n, Removed: max(len(hist)-keep, 0), Kept: min(len(hist), keep)})
		w.Keep[n] = keep
	}
	est, err := gc.EstimateWithout(c.Context, st, w, gc.Options{})
	if err != nil {
		return err
	}
	out.Estimate = est
	if e.json {
		return e.printJSON(out)
	}
	for _, t := range out.Trims {
		e.printf("%s: would drop %s, keep %d\n", safe(t.Name), plural(t.Removed, "history entry"), t.Kept)
	}
	printEstimate(e, "the trim", est)
	return nil
}

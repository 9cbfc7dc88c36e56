package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/gc"
	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/refs"
)

type rmOutput struct {
	Removed string `json:"removed"`
	DryRun  bool   `json:"dry_run"`
	// KeptTags are the tags of the removed ref: they stay (a tag is a
	// promise that NAME:TAG keeps its meaning) and keep their versions.
	KeptTags []tagListing `json:"kept_tags"`
	// Estimate (--dry-run) is what gc would free once the name is gone.
	Estimate *gc.Estimate `json:"estimate,omitempty"`
}

var rmCommand = &cli.Command{
	Name:      "rm",
	Usage:     "remove a ref (with its history) or a tag; its tags stay; gc frees the bytes",
	ArgsUsage: "NAME | NAME:TAG",
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "change nothing: say what would go and what gc would then free"},
	},
	Action: func(c *cli.Context) error {
		e, st, err := withStore(c, 1, "NAME | NAME:TAG")
		if err != nil {
			return err
		}
		arg := c.Args().First()
		name, tag, isTag := strings.Cut(arg, ":")
		if _, err := refs.ParseName(name); err != nil {
			return err
		}
		out := rmOutput{Removed: arg, DryRun: c.Bool("dry-run"), KeptTags: []tagListing{}}
		if !isTag {
			tags, err := names.Tags(st, name)
			if err != nil {
				return err
			}
			for _, t := range tags {
				out.KeptTags = append(out.KeptTags, tagListing{Name: t.Name, Tag: t.Tag, Digest: t.Digest})
			}
		}
		if out.DryRun {
			w := refs.Without{Refs: map[string]bool{name: true}}
			if isTag {
				w = refs.Without{Tags: map[string]bool{arg: true}}
			}
			if out.Estimate, err = gc.EstimateWithout(c.Context, st, w, gc.Options{}); err != nil {
				return err
			}
		} else if err := names.Remove(st, name, tag, isTag); err != nil {
			return err
		}
		if e.json {
			return e.printJSON(out)
		}
		verb := "removed"
		if out.DryRun {
			verb = "would remove"
		}
		what := "ref " + safe(arg) + " and its history"
		if isTag {
			what = "tag " + safe(arg)
		}
		e.printf("%s %s\n", verb, what)
		for _, t := range out.KeptTags {
			e.printf("kept     tag %s:%s at %s (remove it with `mstore rm %s:%s`)\n", safe(t.Name), safe(t.Tag), t.Digest.Short(), safe(t.Name), safe(t.Tag))
		}
		if out.Estimate != nil {
			printEstimate(e, "the removal", out.Estimate)
		} else if !e.quiet {
			e.note("run `mstore gc` to free what no name keeps any more (`mstore rm --dry-run` says how much)\n")
		}
		return nil
	},
}

// printEstimate prints what a change to the names leaves without a name,
// what keeps the rest alive, and what gc would then free.
func printEstimate(e *env, change string, est *gc.Estimate) {
	for _, d := range est.Unnamed {
		e.printf("unnamed  version %s (no name would keep it)\n", d.Short())
	}
	for _, k := range est.KeptAlive {
		e.printf("alive    version %s, kept by %s\n", k.Version.Short(), safe(strings.Join(k.By, ", ")))
	}
	printFrees(e, change, est)
}

package main

import (
	"maps"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/gc"
	"github.com/mstore/mstore/internal/store"
)

type duOutput struct {
	store.Usage
	DedupRatio float64 `json:"dedup_ratio"`
}

var duCommand = &cli.Command{
	Name:      "du",
	Usage:     "logical bytes of all versions against the bytes stored, and the dedup ratio; with REF, one version's unique and shared bytes",
	ArgsUsage: "[REF]",
	Action: func(c *cli.Context) error {
		if c.NArg() == 1 {
			return duVersion(c)
		}
		e, st, err := withStore(c, 0, "[REF]")
		if err != nil {
			return err
		}
		u, err := st.Usage()
		if err != nil {
			return err
		}
		if e.json {
			err = e.printJSON(duOutput{Usage: u, DedupRatio: u.DedupRatio()})
		} else {
			e.printf("%d versions, %d blobs\nlogical    %s\nunique raw %s\nstored     %s (blobs %s, index %s)\ndedup      %.2f×\n",
				u.Versions, u.Blobs, humanBytes(u.LogicalBytes), humanBytes(u.UniqueRawBytes), humanBytes(u.StoredBytes), humanBytes(u.StoredBlobBytes),
				humanBytes(u.IndexBytes), u.DedupRatio())
			for _, name := range slices.Sorted(maps.Keys(u.Codings)) {
				c := u.Codings[name]
				e.printf("  %-8s %d blobs, %s raw as %s (%.3f)\n", name, c.Blobs, humanBytes(c.RawBytes), humanBytes(c.StoredBytes), c.Ratio)
			}
			for _, v := range u.Unreadable {
				e.printf("unreadable version %s (not counted): %s\n", v.Version, v.Error)
			}
		}
		if err == nil && len(u.Unreadable) > 0 {
			err = errs.New(errs.IntegrityError, "du", "%d version(s) cannot be read, e.g. %s (the totals leave them out; run `mstore fsck`)",
				len(u.Unreadable), u.Unreadable[0].Version)
		}
		return err
	},
}

// duVersion is `du REF`: what one version holds alone and what it shares,
// from the gc planner's marks (gc.UsageOf).
func duVersion(c *cli.Context) error {
	e, st, err := withStore(c, 1, "[REF]")
	if err != nil {
		return err
	}
	d, m, err := loadManifest(st, c.Args().First())
	if err != nil {
		return err
	}
	u, err := gc.UsageOf(c.Context, st, d, m, gc.Options{})
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(u)
	}
	e.printf("version  %s\nlogical  %s (its files)\nblobs    %s in %s\nunique   %s in %s no other named version needs\nshared   %s\n",
		d, humanBytes(u.LogicalBytes), humanBytes(u.BlobBytes), plural(u.Blobs, "blob"), humanBytes(u.UniqueBytes), plural(u.UniqueBlobs, "blob"), humanBytes(u.SharedBytes))
	if len(u.HeldBy) == 0 {
		e.printf("held by  no name: `mstore gc` frees it\n")
		return nil
	}
	e.printf("held by  %s\n", safe(strings.Join(u.HeldBy, ", ")))
	printFrees(e, "removing these names", u.IfUnnamed)
	return nil
}

// printFrees says what gc would free after a change to the names.
func printFrees(e *env, change string, est *gc.Estimate) {
	e.printf("frees    %s on disk with `mstore gc` after %s (%s, %s raw); gc frees %s today\n",
		humanBytes(est.FreesBytes), change, plural(est.FreesBlobs, "blob"), humanBytes(est.FreesRawBytes), humanBytes(est.GCFreesNow))
	for _, v := range est.Unreadable {
		e.printf("warning  version %s cannot be read, so gc keeps every blob: run `mstore fsck`\n", v.Version.Short())
	}
}

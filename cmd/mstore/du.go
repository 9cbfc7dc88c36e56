package main

import (
	"maps"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/store"
)

type duOutput struct {
	store.Usage
	DedupRatio float64 `json:"dedup_ratio"`
}

var duCommand = &cli.Command{
	Name:  "du",
	Usage: "logical bytes of all versions against the bytes stored, and the dedup ratio",
	Action: func(c *cli.Context) error {
		e, st, err := withStore(c, 0, "")
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

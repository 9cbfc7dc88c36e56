package main

import (
	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/store"
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
			return e.printJSON(duOutput{Usage: u, DedupRatio: u.DedupRatio()})
		}
		e.printf("%d versions, %d blobs\nlogical %s\nstored  %s (blobs %s, index %s)\ndedup   %.2f×\n",
			u.Versions, u.Blobs, humanBytes(u.LogicalBytes), humanBytes(u.StoredBytes), humanBytes(u.BlobBytes),
			humanBytes(u.IndexBytes), u.DedupRatio())
		return nil
	},
}

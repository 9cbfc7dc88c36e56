package main

import (
	"github.com/urfave/cli/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/refs"
)

type trimmed struct {
	Name    string `json:"name"`
	Removed int    `json:"removed"`
	Kept    int    `json:"kept"`
}

var trimCommand = &cli.Command{
	Name:      "trim",
	Usage:     "drop all but the newest N entries of each ref's history, so that gc can free the versions only they named",
	ArgsUsage: "NAME... --keep N",
	Flags: []cli.Flag{
		&cli.IntFlag{Name: "keep", Usage: "history entries to keep per ref (at least 1: the current version always stays)"},
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
		names := c.Args().Slice()
		for _, n := range names {
			if _, err := refs.ParseName(n); err != nil {
				return err
			}
		}
		st, err := e.open(false)
		if err != nil {
			return err
		}
		var out []trimmed
		err = st.Update(func(tx *bolt.Tx) error {
			out = out[:0]
			for _, n := range names {
				removed, err := refs.TrimHistory(tx, n, keep)
				if err != nil {
					return err
				}
				hist, err := refs.History(tx, n)
				if err != nil {
					return err
				}
				out = append(out, trimmed{Name: n, Removed: removed, Kept: len(hist)})
			}
			return nil
		})
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

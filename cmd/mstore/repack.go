package main

import (
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/repack"
)

type repackOutput struct {
	Plan   *repack.Plan   `json:"plan"`
	Result *repack.Result `json:"result"`
}

var repackCommand = &cli.Command{
	Name:  "repack",
	Usage: "code blobs again, smaller: byte-grouped and entropy coded, or as XOR deltas against the previous version's tensors",
	Flags: []cli.Flag{
		&cli.IntFlag{Name: "workers", Usage: "blobs coded at once (default: one per CPU)"},
		&cli.DurationFlag{Name: "wait", Value: 30 * time.Second, Usage: "how long to wait for the store's lock"},
	},
	Action: func(c *cli.Context) error {
		e, st, err := withStore(c, 0, "[--workers N] [--wait DURATION]")
		if err != nil {
			return err
		}
		plan, res, err := repack.Run(c.Context, st, repack.Options{Workers: c.Int("workers"), LockWait: max(c.Duration("wait"), time.Millisecond)})
		if plan == nil || res == nil {
			return err
		}
		if e.json {
			if perr := e.printJSON(repackOutput{Plan: plan, Result: res}); perr != nil && err == nil {
				err = perr
			}
			return err
		}
		e.printf("coded %d of %d blobs (%d grouped, %d deltas; %d kept raw, %d already coded): %s raw now take %s; %.0f MB/s (%.0f a core)\n",
			res.Grouped+res.Deltas, plan.Blobs, res.Grouped, res.Deltas, res.KeptRaw, plan.AlreadyDone,
			humanBytes(res.CodedRaw), humanBytes(res.CodedStored), res.MBPerSec, res.MBPerCore)
		if n := res.Superseded - res.Deleted; n > 0 {
			e.note("%d raw file(s) the coded copies replace stay until `mstore gc`\n", n)
		}
		for _, p := range res.Problems {
			e.note("%s\n", p)
		}
		return err
	},
}

package main

import (
	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/remote/transfer"
)

var pushCommand = &cli.Command{
	Name:      "push",
	Usage:     "send a version to a remote: the blobs it lacks, the manifest, then the ref (compare-and-swap) or tag",
	ArgsUsage: "REMOTE NAME[:TAG] | oci://HOST/REPO:TAG REF",
	Flags: append(append([]cli.Flag{
		&cli.StringSliceFlag{Name: "mount-from", Usage: "oci://: mount layers the registry has in this other repository instead of uploading them"},
	}, remoteFlags...), ociFlags...),
	Action: func(c *cli.Context) error {
		e, st, err := withStore(c, 2, "REMOTE NAME[:TAG]")
		if err != nil {
			return err
		}
		if u, _, ok, err := ociTarget(c, st); err != nil || ok {
			if err != nil {
				return err
			}
			return pushOCI(c, e, st, u)
		}
		r, name, err := openRemote(c, st, c.Args().Get(0), true)
		if err != nil {
			return err
		}
		defer r.Close()
		res, err := transfer.Push(c.Context, st, r, transfer.PushOptions{
			Version: c.Args().Get(1), Jobs: c.Int("jobs"), RemoteName: name, Progress: e.progress("push"),
		})
		if err != nil {
			return err
		}
		return printTransfer(e, "pushed", res)
	},
}

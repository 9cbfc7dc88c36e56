package main

import (
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/remote/ociremote"
	"github.com/mstore/mstore/internal/remote/transfer"
)

// remoteFlags are the flags every command that talks to a remote takes.
var remoteFlags = []cli.Flag{
	&cli.IntFlag{Name: "jobs", Value: transfer.DefaultJobs, Usage: "requests in flight at once"},
	&cli.StringFlag{Name: "token-file", Usage: "file holding the bearer token (default $MSTORE_TOKEN)"},
	&cli.DurationFlag{Name: "timeout", Value: time.Minute, Usage: "give up when a network remote has not answered for this long"},
	&cli.StringFlag{Name: "endpoint-url", Usage: "the S3-compatible object store of an s3:// remote (default $AWS_ENDPOINT_URL)"},
	&cli.StringFlag{Name: "region", Usage: "its region (default $AWS_REGION, else us-east-1)"},
}

var pullCommand = &cli.Command{
	Name:      "pull",
	Usage:     "fetch a version from a remote: only the blobs this store lacks move",
	ArgsUsage: "REMOTE NAME[:TAG|@DIGEST] | oci://HOST/REPO[:TAG|@sha256:DIGEST]",
	Flags: append([]cli.Flag{
		&cli.StringFlag{Name: "as", Usage: "record the version under this local name"},
		&cli.Int64Flag{Name: "checkpoint-bytes", Value: transfer.DefaultCheckpointBytes, Usage: "record fetched blobs every this many bytes, so an interrupted pull resumes"},
	}, append(remoteFlags, ociFlags...)...),
	Action: func(c *cli.Context) error {
		e, err := newEnv(c)
		if err != nil {
			return err
		}
		if ociremote.IsURL(c.Args().First()) {
			st, err := e.open(true)
			if err != nil {
				return err
			}
			return pullOCI(c, e, st, c.Args().First(), "")
		}
		if err := needArgs(c, 2, "REMOTE NAME[:TAG|@DIGEST]"); err != nil {
			return err
		}
		st, err := e.open(true)
		if err != nil {
			return err
		}
		if u, name, ok, err := ociTarget(c, st); err != nil || ok {
			if err != nil {
				return err
			}
			return pullOCI(c, e, st, u, name)
		}
		r, name, err := openRemote(c, st, c.Args().Get(0), false)
		if err != nil {
			return err
		}
		defer r.Close()
		res, err := transfer.Pull(c.Context, st, r, transfer.PullOptions{
			Version: c.Args().Get(1), As: c.String("as"), Jobs: c.Int("jobs"),
			CheckpointBytes: c.Int64("checkpoint-bytes"), RemoteName: name, Progress: e.progress("pull"),
		})
		if err != nil {
			return err
		}
		return printTransfer(e, "pulled", res)
	},
}

func printTransfer(e *env, verb string, res *transfer.Result) error {
	if e.json {
		return e.printJSON(res)
	}
	what := res.Name
	if res.Tag != "" {
		what += ":" + res.Tag
	}
	moved := humanBytes(res.BytesMoved)
	if res.WireBytes < res.BytesMoved {
		moved += ", " + humanBytes(res.WireBytes) + " of it on the wire, coded"
	}
	e.printf("%s %s %s: %d blobs moved (%s), %d already there, %.2fs\n", verb, what, res.Digest,
		res.BlobsMoved, moved, res.BlobsPresent, res.Seconds)
	return nil
}

package main

import (
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/gc"
)

type gcOutput struct {
	DryRun bool       `json:"dry_run"`
	Plan   *gc.Plan   `json:"plan"`
	Result *gc.Result `json:"result,omitempty"`
}

var gcCommand = &cli.Command{
	Name:  "gc",
	Usage: "delete what no ref history or tag needs (--dry-run prints the plan)",
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "print what would be deleted and stop"},
		&cli.DurationFlag{Name: "grace", Value: gc.DefaultGrace, Usage: "delete files no index record names (left by crashed commands) only when older than this"},
		&cli.DurationFlag{Name: "wait", Value: 30 * time.Second, Usage: "how long to wait for running adds and checkouts"},
		&cli.StringFlag{Name: "remote", Usage: "collect a bucket remote (s3://BUCKET/PREFIX) instead of the store"},
		&cli.BoolFlag{Name: "remove-stale-locks", Usage: "with --remote: delete lock objects of pushes or gcs that are gone (not refreshed for 30m, or their process on this host has exited)"},
		&cli.StringFlag{Name: "endpoint-url", Usage: "the object store of the --remote bucket (default $AWS_ENDPOINT_URL)"},
		&cli.StringFlag{Name: "region", Usage: "its region (default $AWS_REGION, else us-east-1)"},
	},
	Action: func(c *cli.Context) error {
		if c.String("remote") != "" {
			return remoteGC(c)
		}
		e, st, err := withStore(c, 0, "[--dry-run] [--grace DURATION] [--wait DURATION]")
		if err != nil {
			return err
		}
		grace := c.Duration("grace")
		if grace <= 0 {
			grace = -1 // gc.Options: negative keeps no orphan, zero is the default
		}
		wait := max(c.Duration("wait"), time.Millisecond)
		plan, res, err := gc.Run(c.Context, st, gc.Options{Grace: grace, LockWait: wait, DryRun: c.Bool("dry-run")})
		if plan == nil || res == nil && !c.Bool("dry-run") {
			return err // nothing was changed
		}
		if e.json {
			if perr := e.printJSON(gcOutput{DryRun: c.Bool("dry-run"), Plan: plan, Result: res}); perr != nil && err == nil {
				err = perr
			}
			return err
		}
		printGC(e, plan, res)
		return err
	},
}

func printGC(e *env, p *gc.Plan, res *gc.Result) {
	if res == nil { // dry run
		for _, d := range p.RemoveManifests {
			e.printf("remove version %s\n", d)
		}
		for _, f := range p.DeleteFiles {
			e.printf("delete %s (%s, %s)\n", f.Path, humanBytes(f.Size), f.Reason)
		}
		for _, r := range p.Repacks {
			e.printf("repack %s (%d live blobs, %s of %s)\n", r.Path, r.LiveBlobs, humanBytes(r.LiveBytes), humanBytes(r.Size))
		}
		for _, f := range p.Orphans {
			e.printf("delete %s (%s, %s)\n", f.Path, humanBytes(f.Size), f.Reason)
		}
		for _, f := range p.KeptOrphans {
			e.printf("keep   %s (%s, %s)\n", f.Path, humanBytes(f.Size), f.Reason)
		}
		e.printf("would remove %d of %d versions and %d blobs, free %s (%d live blobs, %s, stay)\n",
			len(p.RemoveManifests), p.Manifests, p.FreedBlobs, humanBytes(p.FreedBytes), p.LiveBlobs, humanBytes(p.LiveBytes))
	} else {
		e.printf("removed %d of %d versions and %d blobs, freed %s (%d files deleted, %d packs repacked; %d live blobs, %s, kept)\n",
			res.RemovedManifests, p.Manifests, res.FreedBlobs, humanBytes(res.FreedBytes), res.DeletedFiles, res.RepackedPacks,
			p.LiveBlobs, humanBytes(p.LiveBytes))
		for _, f := range res.FailedDeletes {
			e.printf("failed to delete %s\n", f)
		}
	}
	if p.Reencoded > 0 {
		e.printf("coded %d delta(s) again without the base no version needs any more\n", p.Reencoded)
	}
	for _, u := range p.Unreadable {
		e.printf("unreadable version %s: %s\n", u.Version, u.Error)
	}
	if p.KeptAllBlobs {
		e.printf("kept every blob: which ones the unreadable version(s) need is unknown\n")
	}
	if n := len(p.KeptOrphans); n > 0 {
		e.note("%d unrecorded file(s) kept: younger than the grace period (--grace)\n", n)
	}
}

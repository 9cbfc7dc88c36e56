package main

import (
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/remote/s3remote"
	"github.com/mstore/mstore/internal/remote/transfer"
	"github.com/mstore/mstore/internal/store"
)

type remoteGCOutput struct {
	Remote string              `json:"remote"`
	DryRun bool                `json:"dry_run"`
	Locks  []s3remote.LockInfo `json:"locks"` // others' locks: with --dry-run all, else the stale ones gc ignored
	Plan   *s3remote.GCPlan    `json:"plan"`
	Result *s3remote.GCResult  `json:"result,omitempty"`
}

// remoteGC is `gc --remote`: a bucket remote is collected by planning
// from its refs and tags, then deleting what is unreferenced and older
// than --grace (so a push in flight keeps what it has sent).
func remoteGC(c *cli.Context) error {
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	if err := needArgs(c, 0, "--remote REMOTE [--dry-run] [--grace DURATION]"); err != nil {
		return err
	}
	var st *store.Store
	if s, err := e.open(false); err == nil {
		st = s // for named remotes; a bucket needs no local store
	}
	u, err := transfer.Lookup(st, c.String("remote"))
	if err != nil {
		return err
	}
	if transfer.Kind(u) != "s3" {
		return errs.New(errs.SchemaError, "gc", "%q: gc --remote collects a bucket remote (s3://…); collect another store with `mstore --store DIR gc` where it lives", u)
	}
	r, err := s3remote.Open(u, s3Options(c))
	if err != nil {
		return err
	}
	out := remoteGCOutput{Remote: c.String("remote"), DryRun: c.Bool("dry-run")}
	if out.DryRun {
		out.Locks, err = r.Locks(c.Context)
	} else {
		// Held from before the marking until the last delete: a push in
		// flight refuses to start, or gc refuses while it runs.
		var lock *s3remote.Lock
		lock, out.Locks, err = r.LockGC(c.Context, c.Bool("remove-stale-locks"))
		if err == nil {
			defer lock.Release()
			store.Failpoint(store.FailRemoteGCLocked)
		}
	}
	if err != nil {
		return err
	}
	if out.Plan, err = r.PlanGC(c.Context, c.Duration("grace")); err != nil {
		return err
	}
	plan := out.Plan
	if !out.DryRun {
		out.Result, err = r.ExecuteGC(c.Context, plan)
		if out.Result == nil {
			return err
		}
	}
	if e.json {
		if perr := e.printJSON(out); perr != nil && err == nil {
			err = perr
		}
		return err
	}
	for _, k := range out.Locks {
		state := "held"
		switch {
		case k.Removed:
			state = "stale, removed"
		case k.Stale:
			state = "stale, ignored (--remove-stale-locks deletes it)"
		}
		e.printf("lock   %s (%s, host %s pid %d, refreshed %s): %s\n", k.Key, k.Kind, k.Host, k.PID, k.Refreshed.Format(time.RFC3339), state)
	}
	if out.DryRun {
		for _, o := range plan.Delete {
			e.printf("delete %s (%s)\n", o.Key, humanBytes(o.Size))
		}
		for _, o := range plan.KeptYoung {
			e.printf("keep   %s (%s, younger than --grace)\n", o.Key, humanBytes(o.Size))
		}
		e.printf("would delete %d objects, free %s (%d refs, %d tags, %d live blobs stay)\n", len(plan.Delete), humanBytes(plan.DeleteBytes), plan.Refs, plan.Tags, plan.LiveBlobs)
		return nil
	}
	e.printf("deleted %d objects, freed %s (%d spared: they became live meanwhile; %d younger than --grace kept)\n",
		out.Result.Deleted, humanBytes(out.Result.FreedBytes), out.Result.Spared, len(plan.KeptYoung))
	for _, k := range out.Result.FailedDeletes {
		e.printf("failed to delete %s\n", k)
	}
	return err
}

package main

import (
	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/store"
)

// fsckListed is how many unreferenced objects and leftovers fsck prints
// without --json (every missing or corrupt object is printed).
const fsckListed = 20

var fsckCommand = &cli.Command{
	Name:  "fsck",
	Usage: "re-hash every blob and check every manifest, ref and tag (--repair removes leftovers of crashed commands)",
	Flags: append([]cli.Flag{
		&cli.BoolFlag{Name: "repair", Usage: "remove temp files and unrecorded blob and pack files (never anything recorded)"},
		&cli.BoolFlag{Name: "rebuild-index", Usage: "rebuild a lost or damaged index.db from the blob files and the journal (the old one is moved aside)"},
		&cli.StringFlag{Name: "from", Usage: "with --repair: fetch missing or corrupt blobs and manifests again from this remote (verified)"},
	}, remoteFlags...),
	Action: func(c *cli.Context) error {
		if c.Bool("rebuild-index") {
			return rebuildIndex(c)
		}
		e, st, err := withStore(c, 0, "[--repair | --rebuild-index]")
		if err != nil {
			return err
		}
		r, err := names.Fsck(c.Context, st, store.FsckOptions{Repair: c.Bool("repair")})
		if r == nil {
			return err
		}
		if c.String("from") != "" && err == nil {
			if r, err = healFrom(c, e, st, r); r == nil {
				return err
			}
		}
		if e.json {
			if perr := e.printJSON(r); perr != nil && err == nil {
				err = perr
			}
		} else {
			printFsck(e, r)
		}
		if err != nil {
			return err
		}
		if !r.OK {
			return errs.New(errs.IntegrityError, "fsck", "%d missing and %d corrupt object(s)", len(r.Missing), len(r.Corrupt))
		}
		return nil
	},
}

func rebuildIndex(c *cli.Context) error {
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	if err := needArgs(c, 0, "--rebuild-index"); err != nil {
		return err
	}
	if c.Bool("repair") {
		return usageError("fsck: --repair and --rebuild-index do not go together (run fsck --repair after the rebuild)")
	}
	r, err := names.RebuildIndex(c.Context, e.storeDir, store.Options{}, 0)
	if err != nil {
		return err
	}
	if e.json {
		err = e.printJSON(r)
	} else {
		if r.OldIndex != "" {
			e.printf("moved the old index aside: %s\n", r.OldIndex)
		}
		e.printf("rebuilt %s: %d blobs re-hashed (%s; %d loose, %d packed kept), %d versions, %d refs, %d tags from %d journal batches (%d torn or uncommitted skipped)\n",
			r.NewIndex, r.Blobs, humanBytes(r.Bytes), r.Loose, r.Packed, r.Manifests, r.Refs, r.Tags, r.Batches, r.Skipped)
		for _, p := range r.Problems {
			e.printf("  problem: %s\n", p)
		}
		if r.OK {
			e.printf("ok\n")
		}
	}
	if err == nil && !r.OK {
		err = errs.New(errs.IntegrityError, "fsck", "the index was rebuilt, but %d thing(s) could not be recovered as they were (listed above; run `mstore fsck`)", len(r.Problems))
	}
	return err
}

func printFsck(e *env, r *store.FsckReport) {
	e.printf("checked %d blobs (%s; %d packs), %d versions, %d refs, %d tags\n",
		r.Blobs, humanBytes(r.Bytes), r.Packs, r.Manifests, r.Refs, r.Tags)
	list := func(title string, fs []store.Finding, limit int) {
		if len(fs) == 0 {
			return
		}
		e.printf("%s: %d\n", title, len(fs))
		for i, f := range fs {
			if i == limit {
				e.printf("  … %d more (--json lists all)\n", len(fs)-limit)
				break
			}
			what := f.ID
			if what == "" {
				what = f.Path
			}
			e.printf("  %s %s: %s\n", f.Kind, what, f.Detail)
			for _, a := range f.Affects {
				e.printf("    needed by %s\n", a)
			}
			if f.Heal != "" {
				e.printf("    to heal: %s\n", f.Heal)
			}
		}
	}
	list("missing", r.Missing, len(r.Missing))
	list("corrupt", r.Corrupt, len(r.Corrupt))
	if len(r.Unreferenced) > 0 {
		var versions, blobs int
		var bytes int64
		for _, f := range r.Unreferenced {
			switch f.Kind {
			case "manifest":
				versions++
			case "blob":
				blobs++
				bytes += f.Size
			case "pack":
				bytes += f.Size
			}
		}
		e.printf("unreferenced: %d versions, %d blobs, %s (gc frees them)\n", versions, blobs, humanBytes(bytes))
	}
	list("leftovers of commands that did not finish (gc or fsck --repair removes them)", r.Leftovers, fsckListed)
	list("repaired", r.Repaired, fsckListed)
	for _, w := range r.Warnings {
		e.printf("warning: %s\n", w)
	}
	if r.OK {
		e.printf("ok\n")
	}
}

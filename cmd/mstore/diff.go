package main

import (
	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/codecs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

type diffOutput struct {
	From objects.Digest `json:"from"`
	To   objects.Digest `json:"to"`
	objects.Diff
	Details any `json:"details,omitempty"` // the format's own changes, if it has any
}

var diffCommand = &cli.Command{
	Name:      "diff",
	Usage:     "compare two versions tensor by tensor, and their other files",
	ArgsUsage: "REF REF",
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "all", Usage: "list unchanged tensors and files too"},
	},
	Action: func(c *cli.Context) error {
		e, st, err := withStore(c, 2, "REF REF")
		if err != nil {
			return err
		}
		da, a, err := loadManifest(st, c.Args().Get(0))
		if err != nil {
			return err
		}
		db, b, err := loadManifest(st, c.Args().Get(1))
		if err != nil {
			return err
		}
		out := diffOutput{From: da, To: db, Diff: objects.Compare(a, b)}
		// What the format keeps beside its tensors (GGUF key/values), when
		// both versions are of one format whose codec compares it.
		var details *formats.Details
		if c, ok := codecs.ByName(a.Format); ok && a.Format == b.Format {
			if differ, ok := c.(formats.Differ); ok {
				if details, err = differ.Diff(a, b); err != nil {
					return err
				}
			}
		}
		detailText := renderDetails(details)
		if details != nil {
			out.Details = details.Data
		}
		if e.json {
			return e.printJSON(out)
		}
		d := out.Diff
		e.printf("%s", detailText)
		marks := map[objects.Change]string{objects.Added: "+", objects.Removed: "-", objects.Changed: "~", objects.Unchanged: "="}
		for _, f := range d.Files {
			if f.Change != objects.Unchanged || c.Bool("all") {
				e.printf("%s file   %s (%s)\n", marks[f.Change], safe(f.Path), safe(string(f.Role)))
			}
		}
		for _, t := range d.Tensors {
			if t.Change == objects.Unchanged && !c.Bool("all") {
				continue
			}
			switch t.Change {
			case objects.Changed:
				e.printf("~ tensor %s  %s%s → %s%s, %s in new chunks\n", safe(t.Name), safe(t.FromDType), shapeString(t.FromShape),
					safe(t.ToDType), shapeString(t.ToShape), humanBytes(t.NewChunkBytes))
			case objects.Removed:
				e.printf("- tensor %s  %s\n", safe(t.Name), humanBytes(t.FromBytes))
			default:
				e.printf("%s tensor %s  %s\n", marks[t.Change], safe(t.Name), humanBytes(t.ToBytes))
			}
		}
		e.printf("tensors: %d added (%s), %d removed (%s), %d changed (%s), %d unchanged (%s)\n",
			d.Count[objects.Added], humanBytes(d.Bytes[objects.Added]), d.Count[objects.Removed], humanBytes(d.Bytes[objects.Removed]),
			d.Count[objects.Changed], humanBytes(d.Bytes[objects.Changed]), d.Count[objects.Unchanged], humanBytes(d.Bytes[objects.Unchanged]))
		return nil
	},
}

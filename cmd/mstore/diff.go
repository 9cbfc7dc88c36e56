package main

import (
	"fmt"

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

// writeJSON writes o's members as encoding/json would (see jsonstream.go),
// a tensor at a time: a diff of two models of 100,000 tensors lists them
// all.
func (o diffOutput) writeJSON(d *jsonDoc) {
	d.field("from", o.From)
	d.field("to", o.To)
	streamArray(d, "tensors", o.Tensors)
	streamArray(d, "files", o.Files)
	d.field("count", o.Count)
	d.field("bytes", o.Bytes)
	if o.Details != nil {
		d.field("details", o.Details)
	}
}

var diffCommand = &cli.Command{
	Name:      "diff",
	Usage:     "compare two versions tensor by tensor, and their other files",
	ArgsUsage: "REF REF",
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "all", Usage: "list unchanged tensors and files too"},
		&cli.BoolFlag{Name: "exit-code", Usage: "exit 1 when the versions differ, 0 when they are the same (as git diff --exit-code); errors keep their codes"},
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
		var differ error
		if c.Bool("exit-code") && da != db {
			differ = exitStatus(1)
		}
		if e.json {
			if err := e.streamJSON(out.writeJSON); err != nil {
				return err
			}
			return differ
		}
		d := out.Diff
		e.printf("%s", detailText)
		// A line a changed tensor: 100,000 of them, and on a terminal
		// output writes each through (gathered).
		err = e.gathered(func() {
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
				case objects.Renamed:
					e.printf("> tensor %s → %s  same bytes, renamed (%s)\n", safe(t.FromName), safe(t.Name), humanBytes(t.ToBytes))
				default:
					e.printf("%s tensor %s  %s\n", marks[t.Change], safe(t.Name), humanBytes(t.ToBytes))
				}
			}
			renamed := ""
			if n := d.Count[objects.Renamed]; n > 0 {
				renamed = fmt.Sprintf(", %d renamed with the same bytes (%s)", n, humanBytes(d.Bytes[objects.Renamed]))
			}
			e.printf("tensors: %d added (%s), %d removed (%s), %d changed (%s), %d unchanged (%s)%s\n",
				d.Count[objects.Added], humanBytes(d.Bytes[objects.Added]), d.Count[objects.Removed], humanBytes(d.Bytes[objects.Removed]),
				d.Count[objects.Changed], humanBytes(d.Bytes[objects.Changed]), d.Count[objects.Unchanged], humanBytes(d.Bytes[objects.Unchanged]), renamed)
		})
		if err != nil {
			return err
		}
		return differ
	},
}

// exitStatus is a result that is not an error: the command did its work
// and says something by its exit code alone (diff --exit-code: 1 when the
// versions differ). main prints nothing for it.
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

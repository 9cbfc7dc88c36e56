package main

import (
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/objects"
)

type refListing struct {
	Name string `json:"name"`
	// Digest is the ref's current version; nil for a name that only has
	// tags left (its ref was removed).
	Digest  *objects.Digest `json:"digest"`
	Tags    []string        `json:"tags"`
	History int             `json:"history"`
	Moved   time.Time       `json:"moved"`
}

var lsCommand = &cli.Command{
	Name:  "ls",
	Usage: "list refs with their current version and tags",
	Action: func(c *cli.Context) error {
		e, st, err := withStore(c, 0, "")
		if err != nil {
			return err
		}
		out := []refListing{}
		list, err := names.List(st)
		for _, l := range list {
			out = append(out, refListing{Name: l.Name, Digest: l.Current, Tags: l.Tags, History: l.Entries, Moved: l.Moved})
		}
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(out)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		defer tw.Flush()
		if !e.quiet {
			tw.Write([]byte("NAME\tVERSION\tTAGS\tMOVES\tMOVED\n"))
		}
		for _, r := range out {
			version, moved := "-", "-"
			if r.Digest != nil {
				version, moved = r.Digest.Short(), r.Moved.Format(time.RFC3339)
			}
			tw.Write([]byte(strings.Join([]string{safe(r.Name), version, safe(strings.Join(r.Tags, ",")), itoa(r.History), moved}, "\t") + "\n"))
		}
		return nil
	},
}

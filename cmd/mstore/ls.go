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
	// LogicalBytes is the size of the current version's files (what a
	// checkout writes; `mstore du NAME` says how much of it is shared).
	LogicalBytes *int64 `json:"logical_bytes"`
	Unreadable   string `json:"unreadable,omitempty"`
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
			r := refListing{Name: l.Name, Digest: l.Current, Tags: l.Tags, History: l.Entries, Moved: l.Moved, Unreadable: l.Unreadable}
			if l.Current != nil && l.Unreadable == "" {
				r.LogicalBytes = &l.LogicalBytes
			}
			out = append(out, r)
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
			tw.Write([]byte("NAME\tVERSION\tSIZE\tTAGS\tMOVES\tMOVED\n"))
		}
		for _, r := range out {
			version, size, moved := "-", "-", "-"
			if r.Digest != nil {
				version, moved = r.Digest.Short(), r.Moved.Format(time.RFC3339)
			}
			if r.LogicalBytes != nil {
				size = humanBytes(*r.LogicalBytes)
			} else if r.Unreadable != "" {
				size = "unreadable"
			}
			tw.Write([]byte(strings.Join([]string{safe(r.Name), version, size, safe(strings.Join(r.Tags, ",")), itoa(r.History), moved}, "\t") + "\n"))
		}
		return nil
	},
}

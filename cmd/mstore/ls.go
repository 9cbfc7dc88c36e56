package main

import (
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/objects"
	"github.com/mstore/mstore/refs"
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
		err = st.View(func(tx *bolt.Tx) error {
			list, err := refs.List(tx)
			if err != nil {
				return err
			}
			tags, err := refs.Tags(tx)
			if err != nil {
				return err
			}
			byName := map[string][]string{}
			for _, t := range tags {
				byName[t.Name] = append(byName[t.Name], t.Tag)
			}
			for _, r := range list {
				cur := r.Current
				out = append(out, refListing{Name: r.Name, Digest: &cur, Tags: append([]string{}, byName[r.Name]...),
					History: r.Entries, Moved: r.Moved})
				delete(byName, r.Name)
			}
			for name, tags := range byName {
				out = append(out, refListing{Name: name, Tags: tags})
			}
			sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
			return nil
		})
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

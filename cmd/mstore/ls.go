package main

import (
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/objects"
	"github.com/mstore/mstore/refs"
)

type refListing struct {
	Name    string         `json:"name"`
	Digest  objects.Digest `json:"digest"`
	Tags    []string       `json:"tags"`
	History int            `json:"history"`
	Moved   time.Time      `json:"moved"`
}

var lsCommand = &cli.Command{
	Name:  "ls",
	Usage: "list refs with their current version and tags",
	Action: func(c *cli.Context) error {
		e, err := newEnv(c)
		if err != nil {
			return err
		}
		if err := needArgs(c, 0, ""); err != nil {
			return err
		}
		st, err := e.open(false)
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
				out = append(out, refListing{Name: r.Name, Digest: r.Current, Tags: append([]string{}, byName[r.Name]...),
					History: r.Entries, Moved: r.Moved})
			}
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
			tw.Write([]byte(strings.Join([]string{r.Name, r.Digest.Short(), strings.Join(r.Tags, ","),
				itoa(r.History), r.Moved.Format(time.RFC3339)}, "\t") + "\n"))
		}
		return nil
	},
}

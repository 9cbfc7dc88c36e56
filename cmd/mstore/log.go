package main

import (
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/objects"
)

type logEntry struct {
	Seq      uint64          `json:"seq"`
	Digest   objects.Digest  `json:"digest"`
	Previous *objects.Digest `json:"previous,omitempty"`
	Message  string          `json:"message"`
	Time     time.Time       `json:"time"`
	Tags     []string        `json:"tags"` // the ref's tags at this digest
}

var logCommand = &cli.Command{
	Name:      "log",
	Usage:     "show a ref's history, newest first",
	ArgsUsage: "NAME",
	Action: func(c *cli.Context) error {
		e, st, err := withStore(c, 1, "NAME")
		if err != nil {
			return err
		}
		entries, err := names.History(st, c.Args().First())
		if err != nil {
			return err
		}
		tags, err := names.Tags(st, c.Args().First())
		if err != nil {
			return err
		}
		tagsAt := map[objects.Digest][]string{}
		for _, t := range tags {
			tagsAt[t.Digest] = append(tagsAt[t.Digest], t.Tag)
		}
		out := []logEntry{}
		for _, en := range entries {
			le := logEntry{Seq: en.Seq, Digest: en.Digest, Message: en.Message, Time: en.Time, Tags: append([]string{}, tagsAt[en.Digest]...)}
			if !en.Previous.IsZero() {
				prev := en.Previous
				le.Previous = &prev
			}
			out = append(out, le)
		}
		if e.json {
			return e.printJSON(out)
		}
		name := c.Args().First()
		for i, le := range out {
			mark := ""
			if len(le.Tags) > 0 {
				mark = " (tag: " + safe(strings.Join(le.Tags, ", ")) + ")"
			}
			e.printf("%s~%d  %s%s  %s  %s\n", safe(name), i, le.Digest.Short(), mark, le.Time.Format(time.RFC3339), safe(le.Message))
		}
		return nil
	},
}

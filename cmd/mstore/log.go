package main

import (
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
		out := []logEntry{}
		for _, en := range entries {
			le := logEntry{Seq: en.Seq, Digest: en.Digest, Message: en.Message, Time: en.Time}
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
			e.printf("%s~%d  %s  %s  %s\n", safe(name), i, le.Digest.Short(), le.Time.Format(time.RFC3339), safe(le.Message))
		}
		return nil
	},
}

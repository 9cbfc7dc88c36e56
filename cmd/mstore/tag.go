package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
)

var tagCommand = &cli.Command{
	Name:      "tag",
	Aliases:   []string{"tags"},
	Usage:     "create an immutable tag NAME:TAG at a version; with no REF, list the tags (of NAME) with their digests",
	ArgsUsage: "NAME:TAG REF | [NAME]",
	Action: func(c *cli.Context) error {
		if c.NArg() < 2 {
			return listTags(c)
		}
		e, err := newEnv(c)
		if err != nil {
			return err
		}
		if err := needArgs(c, 2, "NAME:TAG REF"); err != nil {
			return err
		}
		name, tag, ok := strings.Cut(c.Args().Get(0), ":")
		if !ok {
			return usageError("%q: a tag is written NAME:TAG", c.Args().Get(0))
		}
		if _, err := refs.ParseName(name); err != nil {
			return err
		}
		if _, err := refs.ParseTag(tag); err != nil {
			return err
		}
		st, err := e.open(false)
		if err != nil {
			return err
		}
		d, err := names.Resolve(st, c.Args().Get(1))
		if err != nil {
			return err
		}
		created, err := names.Tag(st, name, tag, d)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(map[string]any{"name": name, "tag": tag, "digest": d, "created": created})
		}
		if created {
			e.printf("%s:%s → %s\n", name, tag, d)
		} else {
			e.printf("%s:%s already names %s\n", name, tag, d)
		}
		return nil
	},
}

type tagListing struct {
	Name   string         `json:"name"`
	Tag    string         `json:"tag"`
	Digest objects.Digest `json:"digest"`
}

// listTags is `tag` or `tags NAME`: every tag (of NAME) and its version.
func listTags(c *cli.Context) error {
	e, st, err := withStore(c, c.NArg(), "[NAME]")
	if err != nil {
		return err
	}
	name := c.Args().First()
	if name != "" {
		if _, err := refs.ParseName(name); err != nil {
			return err
		}
	}
	tags, err := names.Tags(st, name)
	if err != nil {
		return err
	}
	out := []tagListing{}
	for _, t := range tags {
		out = append(out, tagListing{Name: t.Name, Tag: t.Tag, Digest: t.Digest})
	}
	if e.json {
		return e.printJSON(out)
	}
	for _, t := range out {
		e.printf("%s:%s  %s\n", safe(t.Name), safe(t.Tag), t.Digest)
	}
	return nil
}

package main

import (
	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/remote/s3remote"
	"github.com/mstore/mstore/internal/remote/transfer"
	"github.com/mstore/mstore/internal/store"
)

var remoteCommand = &cli.Command{
	Name:  "remote",
	Usage: "name remotes: add NAME URL, ls, rm NAME (kept in the store)",
	Subcommands: []*cli.Command{
		{
			Name:      "add",
			Usage:     "record NAME for URL (a path, file://, http(s):// or s3://BUCKET/PREFIX)",
			ArgsUsage: "NAME URL",
			Action: func(c *cli.Context) error {
				e, err := newEnv(c)
				if err != nil {
					return err
				}
				if err := needArgs(c, 2, "NAME URL"); err != nil {
					return err
				}
				st, err := e.open(true)
				if err != nil {
					return err
				}
				if err := transfer.AddRemote(st, c.Args().Get(0), c.Args().Get(1)); err != nil {
					return err
				}
				if e.json {
					return e.printJSON(transfer.Named{Name: c.Args().Get(0), URL: c.Args().Get(1)})
				}
				e.printf("%s → %s\n", c.Args().Get(0), c.Args().Get(1))
				return nil
			},
		},
		{
			Name:  "ls",
			Usage: "list the named remotes",
			Action: func(c *cli.Context) error {
				e, st, err := withStore(c, 0, "")
				if err != nil {
					return err
				}
				list, err := transfer.ListRemotes(st)
				if err != nil {
					return err
				}
				if e.json {
					if list == nil {
						list = []transfer.Named{}
					}
					return e.printJSON(map[string]any{"remotes": list})
				}
				for _, n := range list {
					e.result("%s\t%s\n", n.Name, n.URL)
				}
				return nil
			},
		},
		{
			Name:      "rm",
			Usage:     "forget a named remote (nothing on the remote changes)",
			ArgsUsage: "NAME",
			Action: func(c *cli.Context) error {
				e, st, err := withStore(c, 1, "NAME")
				if err != nil {
					return err
				}
				if err := transfer.RemoveRemote(st, c.Args().Get(0)); err != nil {
					return err
				}
				if e.json {
					return e.printJSON(map[string]any{"name": c.Args().Get(0), "removed": true})
				}
				return nil
			},
		},
	},
}

// s3Options are the flags that reach a bucket (credentials come from the
// AWS_* variables only: flags would show them to every user of the machine).
func s3Options(c *cli.Context) s3remote.Options {
	return s3remote.Options{Endpoint: c.String("endpoint-url"), Region: c.String("region")}
}

// openRemote opens the remote arg names (a name from `remote add`, else a
// URL) with the token of --token-file or $MSTORE_TOKEN. create makes a
// missing path remote (push).
func openRemote(c *cli.Context, st *store.Store, arg string, create bool) (remote.Remote, string, error) {
	u, err := transfer.Lookup(st, arg)
	if err != nil {
		return nil, "", err
	}
	token, err := transfer.Token(c.String("token-file"))
	if err != nil {
		return nil, "", err
	}
	r, err := transfer.Open(u, transfer.OpenOptions{Create: create, Token: token, Timeout: c.Duration("timeout"), S3: s3Options(c)})
	return r, arg, err
}

package main

import (
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/remote/ociremote"
	"github.com/mstore/mstore/internal/remote/transfer"
	"github.com/mstore/mstore/internal/store"
)

// ociFlags are the flags of push and pull that only an oci:// remote reads.
var ociFlags = []cli.Flag{
	&cli.StringFlag{Name: "username", Usage: "oci://: the registry user (default: the docker config's credentials)"},
	&cli.StringFlag{Name: "password-file", Usage: "oci://: file holding the registry password or token (with --username)"},
	&cli.StringFlag{Name: "docker-config", Usage: "oci://: the docker config.json to read credentials from (default $DOCKER_CONFIG/config.json, else ~/.docker/config.json)"},
	&cli.BoolFlag{Name: "plain-http", Usage: "oci://: speak http:// to the registry (always on for a loopback host)"},
}

// openOCI opens the registry of an oci:// URL with the flags' options.
func openOCI(c *cli.Context, u string) (*ociremote.Remote, error) {
	o, err := ociOptions(c)
	if err != nil {
		return nil, err
	}
	return ociremote.Open(u, o)
}

func ociOptions(c *cli.Context) (ociremote.Options, error) {
	o := ociremote.Options{Username: c.String("username"), DockerConfig: c.String("docker-config"),
		PlainHTTP: c.Bool("plain-http"), Timeout: c.Duration("timeout")}
	if f := c.String("password-file"); f != "" {
		if o.Username == "" {
			return o, usageError("--password-file goes with --username")
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return o, errs.Wrap(errs.NotFound, "oci", err, "read the password file")
		}
		o.Password = strings.TrimSpace(string(b))
	}
	return o, nil
}

// ociTarget says whether push or pull goes to a registry, and where: the
// first argument is an oci:// URL naming the repository (and for pull the
// version), or a named remote whose URL is oci://HOST[:PORT][/PREFIX], to
// which the second argument, NAME[:TAG|@sha256:DIGEST], is appended (the
// registry's repository PREFIX/NAME, the local ref NAME).
func ociTarget(c *cli.Context, st *store.Store) (u, name string, ok bool, err error) {
	first := c.Args().First()
	if ociremote.IsURL(first) {
		return first, "", true, nil
	}
	if strings.Contains(first, "://") || strings.ContainsRune(first, '/') {
		return "", "", false, nil // a URL or path of another kind
	}
	base, err := transfer.Lookup(st, first)
	if err != nil || !ociremote.IsURL(base) {
		return "", "", false, nil // openRemote reports an unknown name
	}
	if c.NArg() != 2 {
		return "", "", false, usageError("%s is a registry: give NAME[:TAG] (push: the local version to send; pull: NAME[:TAG|@sha256:DIGEST])", first)
	}
	version := c.Args().Get(1)
	name = version
	if i := strings.IndexAny(version, ":@"); i >= 0 {
		name = version[:i]
	}
	return strings.TrimSuffix(base, "/") + "/" + version, name, true, nil
}

// pullOCI is `mstore pull oci://HOST/REPO[:TAG|@sha256:…]`, or a named
// registry remote's `pull REMOTE NAME[:TAG]` (then as defaults to NAME).
func pullOCI(c *cli.Context, e *env, st *store.Store, u, as string) error {
	if as == "" && c.NArg() != 1 {
		return usageError("pull oci://HOST/REPO[:TAG|@sha256:DIGEST] takes the version in the URL, no other argument")
	}
	if c.String("as") != "" {
		as = c.String("as")
	}
	r, err := openOCI(c, u)
	if err != nil {
		return err
	}
	res, err := ociremote.Pull(c.Context, st, r, transfer.PullOptions{As: as, Jobs: c.Int("jobs"),
		CheckpointBytes: c.Int64("checkpoint-bytes"), Progress: e.progress("pull")})
	if err != nil {
		return err
	}
	return printTransfer(e, "pulled", res)
}

// pushOCI is `mstore push oci://HOST/REPO:TAG REF`.
func pushOCI(c *cli.Context, e *env, st *store.Store, u string) error {
	r, err := openOCI(c, u)
	if err != nil {
		return err
	}
	res, err := ociremote.Push(c.Context, st, r, ociremote.PushOptions{Version: c.Args().Get(1),
		MountFrom: c.StringSlice("mount-from"), Jobs: c.Int("jobs"), Progress: e.progress("push")})
	if err != nil {
		return err
	}
	return printTransfer(e, "pushed", res)
}

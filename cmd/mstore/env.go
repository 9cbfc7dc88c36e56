package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/progress"
	"github.com/mstore/mstore/internal/store"
)

// env is what every command gets from the global flags.
type env struct {
	storeDir string
	json     bool
	quiet    bool
	stdout   io.Writer
	stderr   *os.File
}

func newEnv(c *cli.Context) (*env, error) {
	dir := c.String("store")
	if dir == "" {
		d, err := defaultStoreDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	return &env{storeDir: dir, json: c.Bool("json"), quiet: c.Bool("quiet"), stdout: c.App.Writer, stderr: os.Stderr}, nil
}

// open opens the store; create makes it on first write.
func (e *env) open(create bool) (*store.Store, error) {
	return store.Open(e.storeDir, create, store.Options{})
}

// progress returns a terminal progress bar, or nil when output is for a
// program (--json, --quiet) or stderr is not a terminal.
func (e *env) progress(label string) progress.Reporter {
	if e.json || e.quiet {
		return nil
	}
	return progress.ForTerminal(e.stderr, label)
}

// printJSON writes v as the command's one JSON document.
func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func (e *env) printf(format string, args ...any) { fmt.Fprintf(e.stdout, format, args...) }

// note prints a human remark on stderr unless --quiet or --json.
func (e *env) note(format string, args ...any) {
	if !e.quiet && !e.json {
		fmt.Fprintf(e.stderr, format, args...)
	}
}

// loadManifest resolves name and reads its manifest.
func loadManifest(st *store.Store, name string) (objects.Digest, *objects.Manifest, error) {
	return names.Load(st, name)
}

// withStore is the start of every command that reads an existing store:
// the global flags, the number of arguments, the store.
func withStore(c *cli.Context, nargs int, usage string) (*env, *store.Store, error) {
	e, err := newEnv(c)
	if err != nil {
		return nil, nil, err
	}
	if err := needArgs(c, nargs, usage); err != nil {
		return nil, nil, err
	}
	st, err := e.open(false)
	if err != nil {
		return nil, nil, err
	}
	return e, st, nil
}

// needArgs checks the number of positional arguments.
func needArgs(c *cli.Context, n int, usage string) error {
	if c.NArg() != n {
		return usageError("usage: mstore %s %s", c.Command.Name, usage)
	}
	return nil
}

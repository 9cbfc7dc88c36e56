package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/progress"
	"github.com/mstore/mstore/internal/store"
)

// env is what every command gets from the global flags.
type env struct {
	storeDir     string
	json         bool
	quiet        bool
	progressMode string // --progress: auto, json or none
	stdout       io.Writer
	stderr       *os.File
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
	mode := c.String("progress")
	switch mode {
	case "auto", "json", "none":
	default:
		return nil, globalUsageError("--progress %q: give auto, json or none", mode)
	}
	return &env{storeDir: dir, json: c.Bool("json"), quiet: c.Bool("quiet"), progressMode: mode, stdout: c.App.Writer, stderr: os.Stderr}, nil
}

// open opens the store; create makes it on first write.
func (e *env) open(create bool) (*store.Store, error) {
	return store.Open(e.storeDir, create, store.Options{})
}

// progress returns how the progress of action is shown on stderr: JSON
// status lines with --progress=json, or with --json on a terminal (as
// restic's --json); else a bar on a terminal; nothing in a pipe, with
// --quiet or --progress=none.
func (e *env) progress(action string) progress.Reporter {
	switch {
	case e.quiet || e.progressMode == "none":
		return nil
	case e.progressMode == "json", e.json && progress.IsTerminal(e.stderr):
		return progress.New(e.stderr, action, progress.JSON)
	case e.json:
		return nil
	}
	return progress.ForTerminal(e.stderr, action)
}

// printJSON writes v as the command's one JSON document.
func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printf prints the command's report for a person, on stdout, unless
// --quiet: every command honours --quiet here, in one place.
func (e *env) printf(format string, args ...any) {
	if !e.quiet {
		io.WriteString(e.stdout, singularize(fmt.Sprintf(format, args...)))
	}
}

// gathered runs fn with what it prints gathered in a buffer, written when
// fn returns: on a terminal, where output writes each write through, a
// report of a line a tensor was a write(2) a line.
func (e *env) gathered(fn func()) error {
	bw := bufio.NewWriterSize(e.stdout, 64<<10)
	out := e.stdout
	e.stdout = bw
	defer func() { e.stdout = out }()
	fn()
	return bw.Flush()
}

// result prints what a script needs (add's digest, serve's URL), even with
// --quiet.
func (e *env) result(format string, args ...any) {
	fmt.Fprintf(e.stdout, format, args...)
	flushOutput(e.stdout)
}

// note prints a human remark on stderr unless --quiet or --json, or
// --progress=json keeps stderr for JSON lines.
func (e *env) note(format string, args ...any) {
	if !e.quiet && !e.json && e.progressMode != "json" {
		flushOutput(e.stdout)
		io.WriteString(e.stderr, singularize(fmt.Sprintf(format, args...)))
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
		return usageError("usage: %s", strings.TrimSpace("mstore "+c.Command.Name+" "+usage))
	}
	return nil
}

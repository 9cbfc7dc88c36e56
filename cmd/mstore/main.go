// Command mstore is a git-style, content-addressed store for model weights.
//
// This package only reads flags and prints; the work is done by the store,
// refs, archiver and restorer packages. main maps every error to its class
// key and exit code in one place.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/names"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A write to a closed pipe then fails with EPIPE, which output keeps
	// and main reports with a message and exit code 1, instead of the Go
	// runtime killing the process by SIGPIPE without a word.
	signal.Ignore(syscall.SIGPIPE)
	app := newApp()
	stdout := stdoutFor(os.Stdout)
	app.Writer = stdout
	if path := os.Getenv("MSTORE_CPUPROFILE"); path != "" { // for developers measuring mstore
		if f, err := os.Create(path); err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	if path := os.Getenv("MSTORE_TRACE"); path != "" { // a runtime execution trace, for developers (go tool trace)
		if f, err := os.Create(path); err == nil {
			trace.Start(f)
			defer trace.Stop()
		}
	}
	stopMem := func() {}
	if path := os.Getenv("MSTORE_MEMPROFILE"); path != "" { // the heap at its peak, for developers
		stopMem = startMemProfile(path)
	}
	err := run(ctx, app, os.Args)
	stopMem()
	if stdout.Flush(); err == nil && stdout.err != nil {
		err = stdout.err
	}
	pprof.StopCPUProfile()
	trace.Stop()
	os.Exit(report(os.Stderr, jsonRequested(os.Args), err))
}

// run checks and reorders the command line, runs it, and points a usage
// error at the help of the command it was for.
func run(ctx context.Context, app *cli.App, args []string) error {
	if completing(args) {
		// urfave/cli reads the completion flag as the last argument:
		// reordering would move it.
		return app.RunContext(ctx, args)
	}
	ordered, cmd, err := reorderArgs(app, args)
	if err == nil {
		err = app.RunContext(ctx, ordered)
	}
	return withHelpPointer(err, cmd)
}

func newApp() *cli.App {
	app := &cli.App{
		Name:    "mstore",
		Usage:   "a content-addressed store for model weights",
		Version: buildVersion().String(),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "store", Usage: "store directory (default $MSTORE_DIR, else $XDG_DATA_HOME/mstore)", EnvVars: []string{"MSTORE_DIR"}},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON document on stdout (on a terminal, progress goes to stderr as JSON lines)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print only what scripts need"},
			&cli.StringFlag{Name: "progress", Value: "auto", Usage: "progress of add, checkout, pull and push on stderr: auto (a bar on a terminal), json (one JSON status line at a time), none"},
		},
		Commands:             commands(),
		EnableBashCompletion: true,
		ExitErrHandler:       func(*cli.Context, error) {}, // main reports errors
		OnUsageError:         onUsageError,
	}
	for _, c := range app.Commands {
		c.OnUsageError = onUsageError
	}
	addHelp(app)
	return app
}

// commands is every command, in the order help lists them.
func commands() []*cli.Command {
	return []*cli.Command{
		initCommand, addCommand, checkoutCommand, lsCommand, showCommand, logCommand,
		tagCommand, rmCommand, cpCommand, mvCommand, diffCommand, duCommand,
		gcCommand, fsckCommand, trimCommand, repackCommand,
		pullCommand, pushCommand, remoteCommand, serveCommand,
		versionCommand, completionCommand, manCommand,
	}
}

// onUsageError turns urfave/cli's flag errors into classified errors
// instead of a help page on stdout. Go's flag package names a flag with
// one dash; mstore's flags are written with two.
func onUsageError(c *cli.Context, err error, isSubcommand bool) error {
	u := usageErrorOf(c, err)
	u.global = !isSubcommand
	return u
}

func usageErrorOf(c *cli.Context, err error) *usageErr {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var known []string
		flags := c.App.Flags
		if c.Command != nil && c.Command.Name != "" {
			flags = append(append([]cli.Flag{}, c.Command.Flags...), c.App.Flags...)
		}
		for _, f := range flags {
			known = append(known, f.Names()...)
		}
		msg = "unknown flag --" + name
		if hint := names.DidYouMean(names.Nearest("--"+name, prefixed("--", known))); hint != "" {
			msg += "; " + hint
		}
		return usageError("%s", msg).(*usageErr)
	}
	return usageError("%s", dashes(msg)).(*usageErr)
}

// dashes rewrites Go's one-dash flag names in a flag error to two.
func dashes(msg string) string {
	return oneDashFlag.ReplaceAllString(msg, "${1}--${2}")
}

var oneDashFlag = regexp.MustCompile(`(^|[\s:])-([a-z][a-z0-9-]+)`)

func prefixed(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + strings.TrimPrefix(s, p)
	}
	return out
}

// usageError is a malformed command line. main adds where to read the
// command's usage.
func usageError(format string, args ...any) error {
	return &usageErr{err: errs.New(errs.SchemaError, "", format, args...)}
}

// globalUsageError is a malformed global flag: mstore --help lists them.
func globalUsageError(format string, args ...any) error {
	return &usageErr{err: errs.New(errs.SchemaError, "", format, args...), global: true}
}

type usageErr struct {
	err    *errs.Error
	global bool // about the global flags: mstore --help lists them
}

func (u *usageErr) Error() string { return u.err.Error() }
func (u *usageErr) Unwrap() error { return u.err }

// withHelpPointer ends a usage error with the help to read: the command's
// own when the command is known, else mstore's.
func withHelpPointer(err error, cmd string) error {
	var u *usageErr
	if !errors.As(err, &u) {
		return err
	}
	where := "mstore --help"
	if cmd != "" && !u.global {
		where = "mstore " + cmd + " --help"
	}
	e := *u.err
	e.Msg += fmt.Sprintf(" (see `%s`)", where)
	return &e
}

// classOf classifies an error for the user. Errors of the machine itself
// (a full disk, a permission) have no store class and are reported as
// io_error with exit code 1.
func classOf(err error) (key string, code int) {
	if c := errs.ClassOf(err); c != 0 {
		return c.Key(), c.ExitCode()
	}
	var out *outputError
	switch {
	case errors.As(err, &out):
		return "io_error", 1
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return errs.SizeLimitExceeded.Key(), errs.SizeLimitExceeded.ExitCode()
	case errors.Is(err, fs.ErrNotExist):
		return errs.NotFound.Key(), errs.NotFound.ExitCode()
	case errors.Is(err, context.Canceled):
		return "interrupted", 130
	}
	return "io_error", 1
}

// report prints err (if any) on w and returns the exit code.
func report(w io.Writer, asJSON bool, err error) int {
	if err == nil {
		return 0
	}
	var status exitStatus
	if errors.As(err, &status) {
		return int(status) // an answer, not an error (diff --exit-code)
	}
	key, code := classOf(err)
	msg := singularize(userMessage(err))
	if asJSON {
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"class": key, "message": msg}})
		return code
	}
	fmt.Fprintf(w, "mstore: %s: %s\n", key, safeLines(msg)) // names in messages come from model files
	return code
}

func jsonRequested(args []string) bool {
	for _, a := range args[1:] {
		if a == "--" {
			break
		}
		if a == "--json" || a == "-json" || a == "--json=true" {
			return true
		}
	}
	return false
}

// defaultStoreDir is $XDG_DATA_HOME/mstore, else ~/.local/share/mstore.
func defaultStoreDir() (string, error) {
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "mstore"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", globalUsageError("no --store, $MSTORE_DIR or home directory to put the store in")
	}
	return filepath.Join(home, ".local", "share", "mstore"), nil
}

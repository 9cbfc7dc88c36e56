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
	"runtime/pprof"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/errs"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A write to a closed pipe then fails with EPIPE, which output keeps
	// and main reports with a message and exit code 1, instead of the Go
	// runtime killing the process by SIGPIPE without a word.
	signal.Ignore(syscall.SIGPIPE)
	app := newApp()
	stdout := &output{w: os.Stdout}
	app.Writer = stdout
	if path := os.Getenv("MSTORE_CPUPROFILE"); path != "" { // for developers measuring mstore
		if f, err := os.Create(path); err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	args, err := reorderArgs(app, os.Args)
	if err == nil {
		err = app.RunContext(ctx, args)
	}
	if err == nil && stdout.err != nil {
		err = stdout.err
	}
	pprof.StopCPUProfile()
	os.Exit(report(os.Stderr, jsonRequested(os.Args), err))
}

func newApp() *cli.App {
	app := &cli.App{
		Name:  "mstore",
		Usage: "a content-addressed store for model weights",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "store", Usage: "store directory (default $MSTORE_DIR, else $XDG_DATA_HOME/mstore)", EnvVars: []string{"MSTORE_DIR"}},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON document on stdout"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print only what scripts need"},
		},
		Commands: []*cli.Command{
			initCommand, addCommand, checkoutCommand, lsCommand, showCommand, logCommand,
			tagCommand, rmCommand, cpCommand, mvCommand, diffCommand, duCommand,
			gcCommand, fsckCommand, trimCommand, repackCommand,
			pullCommand, pushCommand, remoteCommand, serveCommand,
		},
		HideHelpCommand: true,
		ExitErrHandler:  func(*cli.Context, error) {}, // main reports errors
		OnUsageError:    onUsageError,
	}
	for _, c := range app.Commands {
		c.OnUsageError = onUsageError
	}
	return app
}

// onUsageError turns urfave/cli's flag errors into classified errors
// instead of a help page on stdout.
func onUsageError(_ *cli.Context, err error, _ bool) error {
	return usageError("%v", err)
}

// usageError is a malformed command line.
func usageError(format string, args ...any) error {
	return errs.New(errs.SchemaError, "", format+" (see `mstore --help`)", args...)
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
	msg := err.Error()
	if asJSON {
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"class": key, "message": msg}})
		return code
	}
	if errs.ClassOf(err) == 0 {
		msg = key + ": " + msg
	}
	fmt.Fprintf(w, "mstore: %s\n", safeLines(msg)) // names in messages come from model files
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
		return "", usageError("no --store, $MSTORE_DIR or home directory to put the store in")
	}
	return filepath.Join(home, ".local", "share", "mstore"), nil
}

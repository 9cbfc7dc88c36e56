package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// reorderArgs lets flags stand before or after the arguments, as in git:
// urfave/cli v2 stops reading flags at the first argument. Global flags found
// anywhere move before the command; a command's flags move before its
// arguments. "--" ends flag reading.
func reorderArgs(app *cli.App, args []string) ([]string, error) {
	if len(args) < 2 {
		return args, nil
	}
	global := flagTable(app.Flags)
	var lead, rest []string
	var cmd *cli.Command
	i := 1
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" || !isFlag(a) {
			break
		}
		lead = append(lead, a)
		if takesValue(global, a) && i+1 < len(args) {
			i++
			lead = append(lead, args[i])
		}
	}
	if i >= len(args) || args[i] == "--" {
		return args, nil
	}
	cmd = app.Command(args[i])
	if cmd == nil {
		if args[i] == "help" {
			return args, nil
		}
		return nil, usageError("unknown command %q", args[i])
	}
	local := flagTable(cmd.Flags)
	var flags, positional []string
	for i++; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			positional = append(positional, args[i+1:]...)
			i = len(args)
		case isFlag(a) && (known(local, a) || !known(global, a)):
			// A command flag, or an unknown one that cli will report.
			flags = append(flags, a)
			if takesValue(local, a) && i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
		case isFlag(a) && known(global, a):
			lead = append(lead, a)
			if takesValue(global, a) && i+1 < len(args) {
				i++
				lead = append(lead, args[i])
			}
		default:
			positional = append(positional, a)
		}
	}
	rest = append(rest, args[0])
	rest = append(rest, lead...)
	rest = append(rest, cmd.Name)
	rest = append(rest, flags...)
	if len(positional) > 0 {
		rest = append(rest, "--")
		rest = append(rest, positional...)
	}
	return rest, nil
}

// flagTable maps every spelling of a flag's names to whether it takes a value.
func flagTable(flags []cli.Flag) map[string]bool {
	t := map[string]bool{}
	for _, f := range flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			t[n] = !isBool
		}
	}
	return t
}

func isFlag(a string) bool { return len(a) > 1 && a[0] == '-' }

func flagName(a string) (name string, inline bool) {
	n := strings.TrimLeft(a, "-")
	if k, _, ok := strings.Cut(n, "="); ok {
		return k, true
	}
	return n, false
}

func known(t map[string]bool, a string) bool {
	n, _ := flagName(a)
	_, ok := t[n]
	return ok || n == "help" || n == "h"
}

func takesValue(t map[string]bool, a string) bool {
	n, inline := flagName(a)
	return t[n] && !inline
}

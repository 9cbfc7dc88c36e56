package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/names"
)

// reorderArgs lets flags stand before or after the arguments, as in git:
// urfave/cli v2 stops reading flags at the first argument. Global flags found
// anywhere move before the command; a command's flags move before its
// arguments. "--" ends flag reading. It also refuses, for every command in
// one place, a flag given twice that takes one value (urfave/cli would keep
// the last silently), and returns the command's name.
func reorderArgs(app *cli.App, args []string) (_ []string, cmdName string, _ error) {
	if len(args) < 2 {
		return args, "", nil
	}
	global := flagTable(app.Flags)
	seenGlobal, seenLocal := map[string]bool{}, map[string]bool{}
	var lead, rest []string
	i := 1
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" || !isFlag(a) {
			break
		}
		if err := once(global, seenGlobal, a); err != nil {
			return nil, "", err
		}
		lead = append(lead, a)
		if takesValue(global, a) && i+1 < len(args) {
			i++
			lead = append(lead, args[i])
		}
	}
	if i >= len(args) || args[i] == "--" {
		return args, "", nil
	}
	cmd := app.Command(args[i])
	if cmd == nil {
		if args[i] == "help" {
			// help TOPIC: an unknown topic is an unknown command.
			if i+1 < len(args) && !isFlag(args[i+1]) && app.Command(args[i+1]) == nil {
				return nil, "", unknownCommand(app, args[i+1])
			}
			return args, "", nil
		}
		return nil, "", unknownCommand(app, args[i])
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
			if err := once(local, seenLocal, a); err != nil {
				return nil, cmd.Name, err
			}
			flags = append(flags, a)
			if takesValue(local, a) && i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
		case isFlag(a) && known(global, a):
			if err := once(global, seenGlobal, a); err != nil {
				return nil, cmd.Name, err
			}
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
	return rest, cmd.Name, nil
}

// unknownCommand names the nearest commands.
func unknownCommand(app *cli.App, name string) error {
	var all []string
	for _, c := range app.Commands {
		all = append(all, c.Names()...)
	}
	all = append(all, "help")
	if hint := names.DidYouMean(names.Nearest(name, all)); hint != "" {
		return usageError("unknown command %q; %s", name, hint)
	}
	return usageError("unknown command %q", name)
}

// flagInfo is what reordering needs to know of one flag.
type flagInfo struct {
	name       string // the first name, which every alias counts as
	takesValue bool
	repeatable bool // a slice flag: each occurrence adds a value
}

// flagTable maps every spelling of a flag's names to its info.
func flagTable(flags []cli.Flag) map[string]flagInfo {
	t := map[string]flagInfo{}
	for _, f := range flags {
		_, isBool := f.(*cli.BoolFlag)
		multi, _ := f.(cli.DocGenerationSliceFlag)
		info := flagInfo{name: f.Names()[0], takesValue: !isBool, repeatable: multi != nil && multi.IsSliceFlag()}
		for _, n := range f.Names() {
			t[n] = info
		}
	}
	return t
}

// once refuses a second occurrence of a flag that takes one value. A
// switch (--json, --force) given twice says the same thing twice, as in
// git, and is let be.
func once(t map[string]flagInfo, seen map[string]bool, a string) error {
	n, _ := flagName(a)
	info, ok := t[n]
	if !ok || info.repeatable || !info.takesValue {
		return nil
	}
	if seen[info.name] {
		return usageError("--%s is given more than once; it takes one value", info.name)
	}
	seen[info.name] = true
	return nil
}

func isFlag(a string) bool { return len(a) > 1 && a[0] == '-' }

func flagName(a string) (name string, inline bool) {
	n := strings.TrimLeft(a, "-")
	if k, _, ok := strings.Cut(n, "="); ok {
		return k, true
	}
	return n, false
}

func known(t map[string]flagInfo, a string) bool {
	n, _ := flagName(a)
	_, ok := t[n]
	return ok || n == "help" || n == "h"
}

func takesValue(t map[string]flagInfo, a string) bool {
	n, inline := flagName(a)
	return t[n].takesValue && !inline
}

// completing reports whether the shell asks for completions.
func completing(args []string) bool {
	return len(args) > 1 && args[len(args)-1] == "--generate-bash-completion"
}

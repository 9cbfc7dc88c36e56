package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
)

// Commands about mstore itself: its version, shell completion, the man page.

// version is what the binary knows of its build.
type version struct {
	Module   string `json:"module"`
	Version  string `json:"version"`            // the module version, "(devel)" for a local build
	Revision string `json:"revision,omitempty"` // the VCS commit
	Time     string `json:"time,omitempty"`     // the commit's time
	Modified bool   `json:"modified"`           // built from a tree with uncommitted changes
	Go       string `json:"go"`
}

func (v version) String() string {
	s := v.Version
	if v.Revision != "" {
		s += " (" + v.Revision
		if v.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s
}

// buildVersion reads the module version and VCS stamp the Go toolchain put
// in the binary (go build records them unless -buildvcs=false).
func buildVersion() version {
	v := version{Module: "github.com/mstore/mstore", Version: "(devel)", Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

var versionCommand = &cli.Command{
	Name:  "version",
	Usage: "print mstore's version and the commit it was built from",
	Action: func(c *cli.Context) error {
		e, err := envWithArgs(c, 0, "")
		if err != nil {
			return err
		}
		v := buildVersion()
		if e.json {
			return e.printJSON(v)
		}
		e.result("mstore %s %s\n", v, v.Go)
		return nil
	},
}

var completionCommand = &cli.Command{
	Name:      "completion",
	Usage:     "print a shell completion script: bash, zsh or fish",
	ArgsUsage: "bash|zsh|fish",
	Action: func(c *cli.Context) error {
		e, err := envWithArgs(c, 1, "bash|zsh|fish")
		if err != nil {
			return err
		}
		switch sh := c.Args().First(); sh {
		case "bash":
			e.result("%s", bashCompletion)
		case "zsh":
			e.result("%s", zshCompletion)
		case "fish":
			s, err := c.App.ToFishCompletion()
			if err != nil {
				return err
			}
			e.result("%s", s)
		default:
			return usageError("no completion for shell %q: give bash, zsh or fish", sh)
		}
		return nil
	},
}

var manCommand = &cli.Command{
	Name:  "man",
	Usage: "print the man page (roff): mstore man > mstore.1",
	Action: func(c *cli.Context) error {
		e, err := envWithArgs(c, 0, "")
		if err != nil {
			return err
		}
		page, err := c.App.ToManWithSection(1)
		if err != nil {
			return fmt.Errorf("generating the man page: %w", err)
		}
		e.result("%s", page)
		return nil
	},
}

// bashCompletion asks mstore itself for the words (urfave/cli's
// --generate-bash-completion), as urfave/cli's own script does.
var bashCompletion = strings.TrimLeft(`
# bash completion for mstore: source <(mstore completion bash)
_mstore_complete() {
  local cur words
  COMPREPLY=()
  cur="${COMP_WORDS[COMP_CWORD]}"
  words=("${COMP_WORDS[@]:0:$COMP_CWORD}")
  local opts
  if [[ "$cur" == -* ]]; then
    opts=$("${words[@]}" "$cur" --generate-bash-completion 2>/dev/null)
  else
    opts=$("${words[@]}" --generate-bash-completion 2>/dev/null)
  fi
  COMPREPLY=($(compgen -W "${opts}" -- "${cur}"))
  return 0
}
complete -o bashdefault -o default -F _mstore_complete mstore
`, "\n")

var zshCompletion = strings.TrimLeft(`
#compdef mstore
# zsh completion for mstore: mstore completion zsh > "${fpath[1]}/_mstore"
_mstore() {
  local -a opts
  local cur=${words[-1]}
  if [[ "$cur" == -* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion 2>/dev/null)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
  fi
  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}
if [[ "$funcstack[1]" == "_mstore" ]]; then
  _mstore "$@"
else
  compdef _mstore mstore
fi
`, "\n")

// envWithArgs is the start of a command that needs no store: the global
// flags and the number of arguments.
func envWithArgs(c *cli.Context, nargs int, usage string) (*env, error) {
	e, err := newEnv(c)
	if err != nil {
		return nil, err
	}
	return e, needArgs(c, nargs, usage)
}

package main

import (
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/codecs"
	"github.com/mstore/mstore/internal/errs"
)

// runApp runs the app in-process on args and returns its stdout.
func runApp(t *testing.T, args ...string) (string, error) {
	t.Helper()
	app := newApp()
	var out bytes.Buffer
	app.Writer = &out
	app.ErrWriter = &out
	err := run(t.Context(), app, append([]string{"mstore", "--store", t.TempDir()}, args...))
	return out.String(), err
}

// TestEveryCommandHasExamples: `help CMD` and `CMD --help` show at least
// one example for every command, the version names for those that read
// one, and there is no help entry for a command that does not exist.
func TestEveryCommandHasExamples(t *testing.T) {
	app := newApp()
	names := map[string]bool{}
	for _, c := range app.Commands {
		names[c.Name] = true
		h, ok := commandHelp[c.Name]
		if !ok {
			t.Errorf("command %q has no entry in commandHelp (help.go)", c.Name)
			continue
		}
		for _, how := range [][]string{{"help", c.Name}, {c.Name, "--help"}} {
			out, err := runApp(t, how...)
			if err != nil {
				t.Fatalf("%v: %v", how, err)
			}
			if ex, _, _ := strings.Cut(after(out, "EXAMPLES:\n"), "\n\n"); !strings.Contains(ex, "mstore "+c.Name) {
				t.Errorf("%v has no example:\n%s", how, out)
			}
			if h.versions != strings.Contains(out, "VERSION NAMES (REF):") {
				t.Errorf("%v: version names shown = %v, want %v", how, !h.versions, h.versions)
			}
		}
		for _, ex := range strings.Split(h.examples, "\n") {
			if !strings.HasPrefix(ex, "mstore ") && !strings.HasPrefix(ex, "source <(mstore ") {
				t.Errorf("%s: example %q does not run mstore", c.Name, ex)
			}
		}
	}
	for n := range commandHelp {
		if !names[n] {
			t.Errorf("commandHelp has %q, which is no command", n)
		}
	}
}

// TestExampleFlagsExist: every --flag in an example is a flag of the
// command (or a global one), so examples cannot rot when flags change.
func after(s, sep string) string {
	_, a, _ := strings.Cut(s, sep)
	return a
}

func TestExampleFlagsExist(t *testing.T) {
	app := newApp()
	global := flagTable(app.Flags)
	flag := regexp.MustCompile(`(?:^|\s)--?([a-z][a-z0-9-]*)`)
	for _, c := range app.Commands {
		local := flagTable(c.Flags)
		for _, ex := range strings.Split(commandHelp[c.Name].examples, "\n") {
			ex, _, _ = strings.Cut(ex, "#")
			ex, _, _ = strings.Cut(ex, "&&")
			if !strings.HasPrefix(ex, "mstore "+c.Name) && !strings.Contains(ex, " "+c.Name+" ") {
				continue // an example that runs another command first
			}
			for _, m := range flag.FindAllStringSubmatch(ex, -1) {
				if _, ok := local[m[1]]; !ok && global[m[1]].name == "" && m[1] != "version" {
					t.Errorf("%s: example %q uses --%s, which it does not have", c.Name, ex, m[1])
				}
			}
		}
	}
}

func TestFormatListsItsValues(t *testing.T) {
	out, err := runApp(t, "checkout", "--help")
	if err != nil {
		t.Fatal(err)
	}
	if want := "one of: " + codecs.Planners(); !strings.Contains(out, want) {
		t.Errorf("checkout --help does not list the formats %q:\n%s", want, out)
	}
}

// TestNoBacktickInFlagUsage: urfave/cli reads `X` in a flag's usage as the
// value's placeholder, which garbled add --help ("--base mstore repack").
func TestNoBacktickInFlagUsage(t *testing.T) {
	seen := map[*cli.Command]bool{}
	var walk func([]*cli.Command)
	walk = func(cs []*cli.Command) {
		for _, c := range cs {
			if seen[c] {
				continue
			}
			seen[c] = true
			for _, f := range c.Flags {
				if u, ok := f.(cli.DocGenerationFlag); ok && strings.Count(u.GetUsage(), "`") > 0 {
					if name, _, _ := strings.Cut(strings.SplitN(u.GetUsage(), "`", 3)[1], " "); strings.ToUpper(name) != name {
						t.Errorf("%s --%s: usage %q has a backticked phrase, shown as the placeholder", c.Name, f.Names()[0], u.GetUsage())
					}
				}
			}
			walk(c.Subcommands)
		}
	}
	walk(newApp().Commands)
}

func TestRepeatedFlags(t *testing.T) {
	app := newApp()
	for _, tc := range []struct {
		args string
		ok   bool
	}{
		{"mstore add m --tag a --tag b", true},                     // a slice flag
		{"mstore checkout r d --tensors a --tensors b", true},      // a slice flag
		{"mstore add m --name a --name b", false},                  // one value
		{"mstore checkout r d --format gguf --format=onnx", false}, // either spelling
		{"mstore add m -m a --message b", false},                   // an alias counts as the flag
		{"mstore --store a ls --store b", false},                   // a global flag
		{"mstore --json ls --json", true},                          // a switch given twice says the same thing
	} {
		_, cmd, err := reorderArgs(app, strings.Fields(tc.args))
		if tc.ok != (err == nil) {
			t.Errorf("%q: %v", tc.args, err)
		}
		if err != nil {
			if errs.ClassOf(err) != errs.SchemaError || !strings.Contains(err.Error(), "is given more than once") {
				t.Errorf("%q: %v, want a schema_error naming the flag", tc.args, err)
			}
			if msg := withHelpPointer(err, cmd).Error(); !strings.Contains(msg, "(see `mstore ") {
				t.Errorf("%q: %q does not point to help", tc.args, msg)
			}
		}
	}
}

// TestUsagePointsToCommandHelp: a usage error names the command's own
// help, and flags are written with two dashes.
func TestUsagePointsToCommandHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"add", "m", "--dry-run"}, "unknown flag --dry-run (see `mstore add --help`)"},
		{[]string{"gc", "--dryrun"}, "unknown flag --dryrun; did you mean \"--dry-run\"? (see `mstore gc --help`)"},
		{[]string{"add"}, "(see `mstore add --help`)"},
		{[]string{"add", "m", "--name", "a", "--name", "b"}, "--name is given more than once; it takes one value (see `mstore add --help`)"},
		{[]string{"chekout"}, "unknown command \"chekout\"; did you mean \"checkout\"? (see `mstore --help`)"},
		{[]string{"--bogus", "ls"}, "unknown flag --bogus (see `mstore --help`)"},
		{[]string{"ls", "--progress", "bar"}, "--progress \"bar\": give auto, json or none (see `mstore --help`)"},
		{[]string{"help", "chekout"}, "unknown command \"chekout\"; did you mean \"checkout\"? (see `mstore --help`)"},
	} {
		_, err := runApp(t, tc.args...)
		if errs.ClassOf(err) != errs.SchemaError {
			t.Errorf("%v: %v, want a schema_error", tc.args, err)
			continue
		}
		if msg := userMessage(err); !strings.Contains(msg, tc.want) {
			t.Errorf("%v: %q, want it to contain %q", tc.args, msg, tc.want)
		}
	}
}

func TestHelpCommand(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"help", "add"}, {"--help"}, {"add", "--help"}} {
		out, err := runApp(t, args...)
		if err != nil || !strings.Contains(out, "USAGE:") {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
}

// TestUserMessage: no package prefix and no class in what a user reads.
func TestUserMessage(t *testing.T) {
	for in, want := range map[error]string{
		errs.New(errs.NotFound, "refs", "no ref %q", "m"):                                          `no ref "m"`,
		errors.Join(errors.New("checkout: journal: sync: no space left")):                          "sync: no space left",
		errs.Wrap(errs.SchemaError, "modeldir", errs.New(errs.SchemaError, "gguf", "bad"), "open"): "open: bad",
		errs.At(errs.InvalidArchive, "safetensors", "/m/a.safetensors", 8, "header too long"):      "/m/a.safetensors at byte 8: header too long",
	} {
		if got := userMessage(in); got != want {
			t.Errorf("userMessage(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMessagePrefixesKnown: every package prefix in the source (an errs
// Pkg, a `const pkg`, a fmt.Errorf("pkg: …")) is one userMessage drops,
// so that a new package cannot bring its prefix back into messages.
func TestMessagePrefixesKnown(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	known := prefixWords()
	prefix := regexp.MustCompile(`^([a-z][a-z0-9]*): `)
	check := func(path string, lit *ast.BasicLit, whole bool) {
		s, err := strconv.Unquote(lit.Value)
		if err != nil || s == "" {
			return
		}
		if !whole {
			m := prefix.FindStringSubmatch(s)
			if m == nil {
				return
			}
			s = m[1]
		}
		if !known[s] {
			t.Errorf("%s: prefix %q is not in packagePrefixes (messages.go)", fset.Position(lit.Pos()), s)
		}
	}
	filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == "e2e" || d.Name() == "bench" || strings.HasPrefix(d.Name(), ".")) {
			if d != nil && d.IsDir() && path != root {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.Contains(path, "testmodel") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if id.Name == "pkg" && i < len(n.Values) {
						if lit, ok := n.Values[i].(*ast.BasicLit); ok {
							check(path, lit, true)
						}
					}
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, _ := sel.X.(*ast.Ident)
				switch {
				case x != nil && x.Name == "errs" && (sel.Sel.Name == "New" || sel.Sel.Name == "Wrap" || sel.Sel.Name == "At") && len(n.Args) > 1:
					if lit, ok := n.Args[1].(*ast.BasicLit); ok {
						check(path, lit, true)
					}
				case x != nil && x.Name == "fmt" && sel.Sel.Name == "Errorf" && len(n.Args) > 0:
					if lit, ok := n.Args[0].(*ast.BasicLit); ok {
						check(path, lit, false)
					}
				}
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Pkg" {
					if lit, ok := n.Value.(*ast.BasicLit); ok {
						check(path, lit, true)
					}
				}
			}
			return true
		})
		return nil
	})
}

func TestVersion(t *testing.T) {
	out, err := runApp(t, "--json", "version")
	if err != nil || !strings.Contains(out, `"module": "github.com/mstore/mstore"`) || !strings.Contains(out, `"go": "go1.`) {
		t.Errorf("version --json: %v\n%s", err, out)
	}
}

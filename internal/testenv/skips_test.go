package testenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEverySkipIsAChoice: a test of the module skips only by choice, under
// -short (inside `if testing.Short()`) or with a `// choice: why` comment
// on the Skip's line (an opt-in benchmark, a property test discarding a
// drawn case). Every other skip is a missing dependency and goes through
// Missing, so that MSTORE_REQUIRE_TESTDATA turns it into a failure.
func TestEverySkipIsAChoice(t *testing.T) {
	root := moduleRoot(t)
	files := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || filepath.Dir(p) == filepath.Join(root, "internal", "testenv") {
			return nil
		}
		files++
		checkSkips(t, root, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("only %d Go files under %s: the walk missed the module", files, root)
	}
}

func checkSkips(t *testing.T, root, path string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	choice := map[int]bool{} // lines with a `// choice:` comment
	for _, g := range f.Comments {
		for _, c := range g.List {
			if strings.HasPrefix(c.Text, "// choice:") {
				choice[fset.Position(c.Pos()).Line] = true
			}
		}
	}
	var underShort []bool // for each enclosing if: does it test testing.Short()
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt:
			if n.Init != nil {
				ast.Inspect(n.Init, visit)
			}
			ast.Inspect(n.Cond, visit)
			underShort = append(underShort, mentionsShort(n.Cond))
			ast.Inspect(n.Body, visit)
			underShort = underShort[:len(underShort)-1]
			if n.Else != nil {
				ast.Inspect(n.Else, visit)
			}
			return false
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Skip" && sel.Sel.Name != "Skipf" && sel.Sel.Name != "SkipNow") {
				return true
			}
			pos := fset.Position(n.Pos())
			if choice[pos.Line] || len(underShort) > 0 && underShort[len(underShort)-1] {
				return true
			}
			rel, _ := filepath.Rel(root, pos.Filename)
			t.Errorf("%s:%d: a skip that is not under testing.Short() nor marked `// choice: why`: "+
				"if a dependency is missing, call testenv.Missing instead", rel, pos.Line)
		}
		return true
	}
	ast.Inspect(f, visit)
}

func mentionsShort(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Short" {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "testing" {
				found = true
			}
		}
		return !found
	})
	return found
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = filepath.Dir(dir)
	}
}

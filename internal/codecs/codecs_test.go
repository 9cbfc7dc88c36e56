package codecs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/formats"
)

// What each codec of the registry claims to do. A codec that gains or
// loses a behaviour changes this table with it, so that a wrong method
// signature (which would silently drop the codec out of an interface) is
// caught here.
var claims = map[string][]string{
	"safetensors": {"Limited", "Planner", "Exporter", "Keeper", "Holder", "Named"},
	"gguf":        {"Limited", "Planner", "Exporter", "Keeper", "Holder", "Named", "Describer", "Differ"},
	"onnx":        {"Limited", "Planner", "Exporter", "Keeper", "Holder", "Named", "Describer"},
	"pytorch":     {"Limited", "Planner", "Expander", "Holder", "Named", "Describer", "Differ"},
	"npz":         {"Limited", "Planner", "Exporter", "Expander", "Named", "Decoder", "Encoder"},
	"mpk":         {"Limited", "Planner", "Exporter", "Named", "Encoder", "Decoder", "DirClaimer", "Describer", "Differ", "LimitDeclarer"},
}

func implements(c formats.Codec) []string {
	var out []string
	for _, x := range []struct {
		name string
		ok   bool
	}{
		{"Limited", is[formats.Limited](c)}, {"Planner", is[formats.Planner](c)}, {"Exporter", is[formats.Exporter](c)},
		{"Keeper", is[formats.Keeper](c)}, {"Holder", is[formats.Holder](c)}, {"Named", is[formats.Named](c)}, {"Expander", is[formats.Expander](c)},
		{"Encoder", is[formats.Encoder](c)}, {"Decoder", is[formats.Decoder](c)}, {"DirClaimer", is[formats.DirClaimer](c)},
		{"Describer", is[formats.Describer](c)}, {"Differ", is[formats.Differ](c)}, {"LimitDeclarer", is[formats.LimitDeclarer](c)},
	} {
		if x.ok {
			out = append(out, x.name)
		}
	}
	return out
}

func is[T any](c formats.Codec) bool { _, ok := c.(T); return ok }

func TestEveryCodecImplementsWhatItClaims(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range All() {
		name := c.Name()
		if seen[name] {
			t.Errorf("two codecs are named %q", name)
		}
		seen[name] = true
		want, got := slices.Clone(claims[name]), implements(c)
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(want, got) {
			t.Errorf("%s implements %v, claims %v", name, got, want)
		}
		if l, ok := c.(formats.Limited); ok && l.WithLimits(formats.Limits{}).Name() != name {
			t.Errorf("%s: WithLimits returns another codec", name)
		}
		if n, ok := c.(formats.Named); ok {
			for _, ext := range n.Extensions() {
				if !c.Claims("model" + ext) {
					t.Errorf("%s: strips %s from names but does not claim model%s", name, ext, ext)
				}
			}
		}
		if p, ok := c.(formats.Planner); ok {
			one := int64(1)
			known := formats.WriteOptions{MaxShardSize: 1, Alignment: 1, ExternalData: "x", InlineData: true, SizeThreshold: &one,
				SplitMaxTensors: 1, SplitMaxSize: 1, DType: "f16", Clamp: true, Extract: true, DropNonTensors: true}.Set()
			for _, o := range p.Honours() {
				if !slices.Contains(known, o) {
					t.Errorf("%s honours %q, which no flag sets", name, o)
				}
			}
		}
	}
	for name := range claims {
		if !seen[name] {
			t.Errorf("the table lists %s, which the registry lacks", name)
		}
	}
	for _, name := range []string{"safetensors", "gguf"} {
		if c, _ := ByName(name); !formats.KeepsMeta(c.(formats.Planner)) {
			t.Errorf("%s keeps metadata", name)
		}
	}
}

// No package fills a string-keyed map from init(): a format's behaviour is
// reached through the interfaces above, at this registry, where a typo is
// a compile error or a failure of the test above.
func TestNoMapsFilledFromInit(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, src, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Name.Name != "init" || fn.Recv != nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if as, ok := n.(*ast.AssignStmt); ok {
					for _, lhs := range as.Lhs {
						if _, ok := lhs.(*ast.IndexExpr); ok {
							t.Errorf("%s: init() fills a map (%s); give the codec a method instead", p, src[lhs.Pos()-1:lhs.End()-1])
						}
					}
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

package hfindex_test

import (
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/hfindex"
	"github.com/mstore/mstore/internal/formats/strictjson"
)

var kind = hfindex.Kind{
	Pkg: "test", IndexSuffix: ".st.index.json",
	IsContainer: func(p string) bool { return strings.HasSuffix(p, ".st") },
	Names:       formats.NewShardNames(".st"), What: "a test file or index", Containers: ".st files",
}

func index(weights string) []byte {
	return []byte(`{"metadata": {"total_size": 8}, "weight_map": {` + weights + `}}`)
}

// TestReadModel checks the sorting of paths and the checks ReadModel makes
// before any container is opened, by error class.
func TestReadModel(t *testing.T) {
	shards := []string{"m-00001-of-00002.st", "m-00002-of-00002.st"}
	both := index(`"a": "m-00001-of-00002.st", "b": "m-00002-of-00002.st"`)
	for _, tc := range []struct {
		name  string
		files map[string][]byte
		paths []string
		class errs.Class // the zero Class: accepted
	}{
		{"sharded", map[string][]byte{"m.st.index.json": both}, append([]string{"m.st.index.json"}, shards...), 0},
		{"single file, no index", nil, []string{"model.st"}, 0},
		{"a path the codec does not claim", nil, []string{"model.bin"}, errs.SchemaError},
		{"a shard not among the files", map[string][]byte{"m.st.index.json": both}, []string{"m.st.index.json", shards[0]}, errs.SchemaError},
		{"a shard with no index", nil, shards, errs.SchemaError},
		{"a shard outside the directory", map[string][]byte{"m.st.index.json": index(`"a": "../m-00001-of-00001.st"`)}, []string{"m.st.index.json"}, errs.PathTraversal},
		{"an index that is not JSON", map[string][]byte{"m.st.index.json": []byte("{")}, []string{"m.st.index.json"}, errs.SchemaError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := hfindex.ReadModel(formattest.NewMemDir(tc.files), tc.paths, kind)
			if tc.class == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if len(m.Containers)+len(m.IndexPaths) != len(tc.paths) || len(m.Indexes) != len(m.IndexPaths) {
					t.Fatalf("containers %v, indexes %v of %v", m.Containers, m.IndexPaths, tc.paths)
				}
				return
			}
			if got := errs.ClassOf(err); got != tc.class {
				t.Fatalf("class %v, want %v (%v)", got, tc.class, err)
			}
		})
	}
}

// TestCheckPlacement checks that a weight_map entry naming a missing
// tensor, or the wrong file, is refused, and that the names are returned.
func TestCheckPlacement(t *testing.T) {
	idx, err := hfindex.Parse("m.st.index.json", index(`"a": "m-00001-of-00002.st", "b": "m-00002-of-00002.st"`), "test")
	if err != nil {
		t.Fatal(err)
	}
	named, err := idx.CheckPlacement(map[string]string{"a": "m-00001-of-00002.st", "b": "m-00002-of-00002.st"})
	if err != nil || !named["a"] || !named["b"] || len(named) != 2 {
		t.Fatalf("named %v, %v", named, err)
	}
	for _, fileOf := range []map[string]string{
		{"a": "m-00001-of-00002.st"},
		{"a": "m-00001-of-00002.st", "b": "m-00001-of-00002.st"},
	} {
		if _, err := idx.CheckPlacement(fileOf); errs.ClassOf(err) != errs.SchemaError {
			t.Errorf("%v: %v, want schema_error", fileOf, err)
		}
	}
}

// Nesting deeper than strictjson.MaxDepth anywhere in an index (a
// metadata value, which is otherwise skipped) is size_limit_exceeded,
// not a deep recursion; as deep as the limit is taken.
func TestDeepIndexIsRefused(t *testing.T) {
	nest := func(n int) []byte {
		return []byte(`{"metadata":{"x":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `},"weight_map":{"a":"m.st"}}`)
	}
	if _, err := hfindex.Parse("m.st.index.json", nest(strictjson.MaxDepth-2), "safetensors"); err != nil {
		t.Fatalf("nesting at the limit: %v", err)
	}
	for _, n := range []int{strictjson.MaxDepth - 1, 100_000} {
		if _, err := hfindex.Parse("m.st.index.json", nest(n), "safetensors"); errs.ClassOf(err) != errs.SizeLimitExceeded {
			t.Errorf("nesting %d deep: %v, want size_limit_exceeded", n+2, err)
		}
	}
}

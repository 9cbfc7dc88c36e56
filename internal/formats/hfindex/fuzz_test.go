package hfindex_test

import (
	"encoding/json"
	"math"
	"path"
	"strconv"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats/hfindex"
)

// FuzzParse is differential: an index Parse takes, encoding/json reads to
// the same weight_map and total_size (and finds no other top-level key);
// every refusal has the class of its kind. (What Parse refuses beyond
// encoding/json, repeated keys and lone UTF-16 surrogates, the
// SafeTensors header rules refuse too.)
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"metadata": {"total_size": 8, "format": {"nested": [1, "x", null]}}, "weight_map": {"a": "m-00001-of-00002.st", "b": "m-00002-of-00002.st"}}`,
		`{"weight_map": {"a\u00e9": "sub/m.st"}, "metadata": null}`,
		`{"weight_map": {"a": "../m.st"}}`,
		`{"weight_map": {"a": "m.st", "a": "m.st"}}`,
		`{"metadata": {"total_size": -1}, "weight_map": {"a": "m.st"}}`,
		`{"metadata": {"total_size": 1.0}, "weight_map": {"a": "m.st"}}`,
		`{"metadata": {"total_size": 18446744073709551616}, "weight_map": {"a": "m.st"}}`,
		`{"weight_map": {}}`, `{"weight_map": {"a": 1}}`, `{"other": 1}`, `[]`, `{"weight_map": {"a": "m.st"}} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		idx, err := hfindex.Parse("d/m.st.index.json", b, "test")
		if err != nil {
			switch errs.ClassOf(err) {
			case errs.SchemaError, errs.SizeLimitExceeded, errs.PathTraversal:
			default:
				t.Fatalf("refused with no class of its kind: %v", err)
			}
			return
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(b, &top); err != nil {
			t.Fatalf("took what encoding/json refuses: %v", err)
		}
		var weights map[string]string
		if err := json.Unmarshal(top["weight_map"], &weights); err != nil || len(weights) != len(idx.WeightMap) || len(top) > 2 {
			t.Fatalf("weight_map %v (%v) of %d keys, read as %d entries; top-level keys %d", weights, err, len(weights), len(idx.WeightMap), len(top))
		}
		for _, m := range idx.WeightMap {
			if file, ok := weights[m.Tensor]; !ok || path.Join("d", file) != m.Shard {
				t.Fatalf("tensor %q in %q, encoding/json says %q", m.Tensor, m.Shard, file)
			}
		}
		var meta map[string]json.RawMessage
		if err := json.Unmarshal(top["metadata"], &meta); top["metadata"] != nil && err != nil {
			t.Fatalf("metadata: %v", err)
		}
		want := int64(-1)
		if raw, ok := meta["total_size"]; ok {
			n, err := strconv.ParseUint(string(raw), 10, 64)
			if err != nil {
				t.Fatalf("total_size %s taken: %v", raw, err)
			}
			want = int64(min(n, math.MaxInt64))
		}
		if idx.TotalSize != want {
			t.Fatalf("total_size %d, encoding/json %d", idx.TotalSize, want)
		}
	})
}

package safetensors

import (
	"fmt"
	"maps"
	"sort"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
)

const indexPath = "model.safetensors.index.json"

// shardFiles is the sharded model of shardSpecs: 4 shards, the last holding
// lm_head alone because it is over the 300-byte limit.
func shardFiles(t *testing.T) map[string][]byte {
	t.Helper()
	files := generate(t, shardSpecs, shardOpts)
	if len(files) != 5 {
		t.Fatalf("generated %d files, want 4 shards and an index", len(files))
	}
	return files
}

// withIndex returns files with the index replaced by one built from a
// weight_map (tensor → file) and a metadata object's text ("" for none).
func withIndex(files map[string][]byte, weightMap map[string]string, metadata string) map[string][]byte {
	out := maps.Clone(files)
	var entries []string
	for _, name := range sortedKeys(weightMap) {
		entries = append(entries, fmt.Sprintf("%q: %q", name, weightMap[name]))
	}
	body := `"weight_map": {` + strings.Join(entries, ", ") + "}"
	if metadata != "" {
		body = `"metadata": ` + metadata + ", " + body
	}
	out[indexPath] = []byte("{" + body + "}")
	return out
}

func truthMap() map[string]string {
	return map[string]string{
		"model.embed.weight": "model-00001-of-00004.safetensors",
		"model.layers.0.w":   "model-00002-of-00004.safetensors",
		"model.layers.0.b":   "model-00002-of-00004.safetensors",
		"model.layers.1.w":   "model-00002-of-00004.safetensors",
		"model.norm":         "model-00003-of-00004.safetensors",
		"lm_head":            "model-00004-of-00004.safetensors",
	}
}

func TestParseSharded(t *testing.T) {
	files := shardFiles(t)
	l, err := parseFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range l.Files {
		paths = append(paths, f.Path)
	}
	want := []string{
		"model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
		"model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors", indexPath,
	}
	if !sort.StringsAreSorted(paths) || strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Fatalf("files %v, want %v", paths, want)
	}
	idx := l.Files[4]
	if !idx.Index || len(idx.Extents) != 1 || idx.Extents[0].Size != idx.Size {
		t.Errorf("index file %+v", idx)
	}
	if l.Files[0].Meta["format"] != "pt" {
		t.Errorf("shard metadata %v", l.Files[0].Meta)
	}

	// The regenerated truth also passes when written by hand, with the
	// extra metadata newer transformers add and in any key order.
	for name, meta := range map[string]string{
		"no metadata":      "",
		"null metadata":    "null",
		"total_parameters": `{"total_parameters": 1234, "total_size": 960, "extra": {"nested": [1, {"a": null}]}}`,
	} {
		if _, err := parseFiles(withIndex(files, truthMap(), meta)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestParseRefusesInconsistentShards(t *testing.T) {
	files := shardFiles(t)
	edit := func(change func(m map[string]string)) map[string]string {
		m := truthMap()
		change(m)
		return m
	}
	without := func(p string) map[string][]byte {
		out := maps.Clone(files)
		delete(out, p)
		return out
	}
	plus := func(p string, b []byte) map[string][]byte {
		out := maps.Clone(files)
		out[p] = b
		return out
	}
	cases := []struct {
		name  string
		files map[string][]byte
		want  errs.Class
		msg   string
	}{
		{"shards without index", without(indexPath), errs.SchemaError, "model.safetensors.index.json is missing"},
		{"index without shards", map[string][]byte{indexPath: files[indexPath]}, errs.SchemaError, "not among the model's .safetensors files"},
		{"index with empty weight_map", withIndex(map[string][]byte{}, map[string]string{}, ""), errs.SchemaError, "names no shards"},
		{"index naming a missing shard", without("model-00003-of-00004.safetensors"), errs.SchemaError, "names shard model-00003-of-00004.safetensors"},
		{"index naming a missing tensor", withIndex(files, edit(func(m map[string]string) { m["ghost"] = "model-00001-of-00004.safetensors" }), ""), errs.SchemaError, `"ghost", which no file holds`},
		{"tensor missing from the index", withIndex(files, edit(func(m map[string]string) { delete(m, "model.layers.0.b") }), ""), errs.SchemaError, `"model.layers.0.b" of shard model-00002-of-00004.safetensors is missing`},
		{"tensor in the wrong shard", withIndex(files, edit(func(m map[string]string) { m["model.layers.0.b"] = "model-00001-of-00004.safetensors" }), ""), errs.SchemaError, "but it is in model-00002"},
		{"total_size wrong", withIndex(files, truthMap(), `{"total_size": 961}`), errs.SchemaError, "total_size is 961"},
		{"total_size not an integer", withIndex(files, truthMap(), `{"total_size": 960.0}`), errs.SchemaError, "non-negative integer"},
		{"total_size huge", withIndex(files, truthMap(), `{"total_size": 99999999999999999999999}`), errs.SchemaError, "total_size"},
		{"shard not in the index", plus("model-00005-of-00005.safetensors", rawFile("{}      ", nil)), errs.SchemaError, "not named by the weight_map of model.safetensors.index.json"},
		{"incomplete shard set", withIndex(files, edit(func(m map[string]string) { delete(m, "model.norm") }), ""), errs.SchemaError, "shard 3 of 4"},
		{"shard number 0", plus("model-00000-of-00004.safetensors", rawFile("{}      ", nil)), errs.SchemaError, ""},
		{"shard named by two indexes", plus("other.safetensors.index.json", files[indexPath]), errs.SchemaError, "also named by"},
		{"index not JSON", plus(indexPath, []byte(`{"weight_map": {`)), errs.SchemaError, "JSON"},
		// The index is read while the headers are; its refusal is still the one reported.
		{"index and a shard refused", func() map[string][]byte {
			out := plus(indexPath, []byte(`[]`))
			out["model-00002-of-00004.safetensors"] = []byte("short")
			return out
		}(), errs.SchemaError, "not a JSON object"},
		{"index not an object", plus(indexPath, []byte(`[]`)), errs.SchemaError, "not a JSON object"},
		{"index without weight_map", plus(indexPath, []byte(`{"metadata": {}}`)), errs.SchemaError, "no weight_map"},
		{"index unknown key", plus(indexPath, []byte(`{"weight_map": {}, "x": 1}`)), errs.SchemaError, "unknown key"},
		{"index duplicate key", plus(indexPath, []byte(`{"weight_map": {}, "weight_map": {}}`)), errs.SchemaError, "duplicate"},
		{"weight_map duplicate tensor", plus(indexPath, []byte(`{"weight_map": {"a": "model-00001-of-00004.safetensors", "a": "x"}}`)), errs.SchemaError, "twice"},
		{"weight_map value not a string", plus(indexPath, []byte(`{"weight_map": {"a": 1}}`)), errs.SchemaError, "file name"},
		{"metadata duplicate key", withIndex(files, truthMap(), `{"total_size": 960, "total_size": 960}`), errs.SchemaError, "duplicate"},
		{"metadata nested too deep", withIndex(files, truthMap(), `{"x": `+strings.Repeat("[", 100)+strings.Repeat("]", 100)+`}`), errs.SizeLimitExceeded, "nested"},
		{"weight_map ../x", withIndex(files, edit(func(m map[string]string) { m["lm_head"] = "../model-00004-of-00004.safetensors" }), ""), errs.PathTraversal, "not a clean relative path"},
		{"weight_map absolute", withIndex(files, edit(func(m map[string]string) { m["lm_head"] = "/etc/passwd" }), ""), errs.PathTraversal, ""},
		{"weight_map backslash", withIndex(files, edit(func(m map[string]string) { m["lm_head"] = `..\x.safetensors` }), ""), errs.PathTraversal, ""},
		{"weight_map drive", withIndex(files, edit(func(m map[string]string) { m["lm_head"] = "C:x.safetensors" }), ""), errs.PathTraversal, ""},
		{"weight_map inner ..", withIndex(files, edit(func(m map[string]string) { m["lm_head"] = "a/../model-00004-of-00004.safetensors" }), ""), errs.PathTraversal, ""},
		{"weight_map fullwidth dots", withIndex(files, edit(func(m map[string]string) { m["lm_head"] = "\uff0e\uff0e/x.safetensors" }), ""), errs.PathTraversal, ""},
		{"weight_map division slash", withIndex(files, edit(func(m map[string]string) { m["lm_head"] = "..\u2215x.safetensors" }), ""), errs.PathTraversal, ""},
		{"weight_map empty name", withIndex(files, edit(func(m map[string]string) { m["lm_head"] = "" }), ""), errs.PathTraversal, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseFiles(c.files)
			checkRefusal(t, err, c.want, c.msg)
		})
	}
}

func TestParseRefusesTensorInTwoShards(t *testing.T) {
	files := map[string][]byte{
		"model-00001-of-00002.safetensors": rawFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{1}),
		"model-00002-of-00002.safetensors": rawFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, []byte{1, 2}),
		indexPath:                          []byte(`{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}`),
	}
	_, err := parseFiles(files)
	checkRefusal(t, err, errs.SchemaError, `tensor "a" is also in model-00001-of-00002.safetensors`)
}

func TestParseShardsInSubdirectory(t *testing.T) {
	files := generate(t, shardSpecs, PlanOptions{MaxShardSize: 300, Name: "weights/diffusion_model"})
	l, err := parseFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Files[len(l.Files)-1].Path; got != "weights/diffusion_model.safetensors.index.json" {
		t.Errorf("index at %s", got)
	}
	if !strings.Contains(string(files["weights/diffusion_model.safetensors.index.json"]), `"lm_head": "diffusion_model-00004-of-00004.safetensors"`) {
		t.Errorf("weight_map names shards by path: %s", files["weights/diffusion_model.safetensors.index.json"])
	}
}

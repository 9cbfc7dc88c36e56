package pytorch

import (
	"maps"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats/formattest"
)

const indexName = "pytorch_model.bin.index.json"

func parseModel(files map[string][]byte) error {
	_, err := Codec.Parse(formattest.NewMemDir(files), formattest.ClaimedPaths(Codec, files))
	return err
}

func TestShardedCheckpoint(t *testing.T) {
	files := planned(t, mixed, PlanOptions{MaxShardSize: 80})
	l, err := Codec.Parse(formattest.NewMemDir(files), formattest.ClaimedPaths(Codec, files))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Files) != 4 || l.Files[3].Path != indexName || !l.Files[3].Index || len(l.Tensors) != len(mixed) {
		t.Fatalf("files %d, tensors %d", len(l.Files), len(l.Tensors))
	}

	edit := func(old, new string) map[string][]byte {
		out := maps.Clone(files)
		if !strings.Contains(string(out[indexName]), old) {
			t.Fatalf("test bug: %q is not in the index", old)
		}
		out[indexName] = []byte(strings.Replace(string(out[indexName]), old, new, 1))
		return out
	}
	drop := func(name string) map[string][]byte {
		out := maps.Clone(files)
		delete(out, name)
		return out
	}
	noSize := edit(`"total_size": 168`, `"total_parameters": 3, "total_size": 168`)
	if err := parseModel(noSize); err != nil {
		t.Fatalf("other metadata keys are refused: %v", err)
	}
	if err := parseModel(edit(`"metadata": {
    "total_size": 168
  },`, "")); err != nil {
		t.Fatalf("an index without metadata is refused: %v", err)
	}
	for _, tc := range []struct {
		name  string
		files map[string][]byte
		class errs.Class
		want  string
	}{
		{"a shard is missing", drop("pytorch_model-00002-of-00003.bin"), errs.SchemaError, "pytorch_model-00002-of-00003.bin"},
		{"a shard without its index", drop(indexName), errs.SchemaError, "no index"},
		{"weight_map names a tensor no shard holds", edit(`"mask":`, `"ghost": "pytorch_model-00003-of-00003.bin", "mask":`), errs.SchemaError, "ghost"},
		{"weight_map lacks a tensor", edit(`"mask": "pytorch_model-00003-of-00003.bin",`, ""), errs.SchemaError, "mask"},
		{"weight_map puts a tensor in the wrong shard", edit(`"mask": "pytorch_model-00003`, `"mask": "pytorch_model-00002`), errs.SchemaError, "mask"},
		{"wrong total_size", edit(`"total_size": 168`, `"total_size": 169`), errs.SchemaError, "total_size"},
		{"negative total_size", edit(`"total_size": 168`, `"total_size": -1`), errs.SchemaError, "total_size"},
		{"weight_map leaves the directory", edit(`"mask": "pytorch_model-00003-of-00003.bin"`, `"mask": "../pytorch_model-00003-of-00003.bin"`), errs.PathTraversal, "../"},
		{"weight_map names a tensor twice", edit(`"mask":`, `"fp8": "pytorch_model-00003-of-00003.bin", "mask":`), errs.SchemaError, "twice"},
		{"unknown key", edit(`"metadata"`, `"extra": 1, "metadata"`), errs.SchemaError, "extra"},
		{"duplicate key", edit(`"metadata"`, `"weight_map": {}, "metadata"`), errs.SchemaError, "duplicate"},
		{"not JSON", edit(`{`, `[`), errs.SchemaError, "object"},
		{"cut short", edit("\n  }\n}\n", ""), errs.SchemaError, "JSON"},
		{"shard count disagrees", edit(`"fp8": "pytorch_model-00003-of-00003.bin"`, `"fp8": "pytorch_model-00003-of-00004.bin"`), errs.SchemaError, "00004"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantClass(t, parseModel(tc.files), tc.class, tc.want)
		})
	}
}

// total_size may count each storage once, as huggingface_hub does, when
// tensors share storages.
func TestTotalSizeOfSharedStorages(t *testing.T) {
	shard := viewsCheckpoint() // storages of 48 and 24 bytes; tensors a, b, d of 48, c of 16, e of 16
	for _, total := range []string{"48", "72", "176"} {
		files := map[string][]byte{
			"pytorch_model-00001-of-00001.bin": shard,
			indexName: []byte(`{"metadata": {"total_size": ` + total + `}, "weight_map": {"a": "pytorch_model-00001-of-00001.bin",
				"b": "pytorch_model-00001-of-00001.bin", "c": "pytorch_model-00001-of-00001.bin",
				"d": "pytorch_model-00001-of-00001.bin", "e": "pytorch_model-00001-of-00001.bin"}}`),
		}
		err := parseModel(files)
		if total == "48" {
			wantClass(t, err, errs.SchemaError, "total_size")
		} else if err != nil {
			t.Errorf("total_size %s: %v", total, err)
		}
	}
}

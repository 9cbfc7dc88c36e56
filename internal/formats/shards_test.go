package formats

import (
	"errors"
	"testing"

	"github.com/mstore/mstore/internal/errs"
)

func TestShardNames(t *testing.T) {
	names := NewShardNames(".safetensors")
	id, ok := names.Parse("sub/model-00002-of-00003.safetensors")
	if !ok || id != (ShardID{Prefix: "sub/model", K: 2, N: 3}) {
		t.Fatalf("Parse = %+v, %v", id, ok)
	}
	for _, p := range []string{"model.safetensors", "model-1-of-2.bin", "m-99999999999999999999-of-1.safetensors"} {
		if _, ok := names.Parse(p); ok {
			t.Errorf("%s parsed as a shard", p)
		}
	}
	complete := []string{"m-00001-of-00002.safetensors", "m-00002-of-00002.safetensors", "other.safetensors"}
	if err := names.CheckSet("t", "m.index.json", complete); err != nil {
		t.Fatal(err)
	}
	for name, shards := range map[string][]string{
		"gap":        {"m-00001-of-00003.safetensors", "m-00003-of-00003.safetensors"},
		"zero":       {"m-00000-of-00001.safetensors"},
		"mixed N":    {"m-00001-of-00002.safetensors", "m-00002-of-00003.safetensors"},
		"k beyond n": {"m-00004-of-00003.safetensors"},
	} {
		if err := names.CheckSet("t", "m.index.json", shards); !errors.Is(err, errs.SchemaError) {
			t.Errorf("%s: %v, want schema_error", name, err)
		}
	}
}

func TestSplitShardsAndIndexJSON(t *testing.T) {
	ts := []Tensor{{Name: "a", Size: 6}, {Name: "b\b\u00e9", Size: 6}, {Name: "c", Size: 20}, {Name: "d", Size: 1}}
	shards := SplitShards(ts, 10)
	if len(shards) != 4 || len(SplitShards(ts, 0)) != 1 {
		t.Fatalf("shards %v", shards)
	}
	got := string(ShardIndexJSON(ts, [][]int{{0, 1}, {2, 3}}, []string{"sub/m-1.bin", "sub/m-2.bin"}))
	// What Python writes: json.dumps(d, indent=2, sort_keys=True) + "\n".
	want := "{\n  \"metadata\": {\n    \"total_size\": 33\n  },\n  \"weight_map\": {\n    \"a\": \"m-1.bin\",\n    \"b\\b\\u00e9\": \"m-1.bin\",\n    \"c\": \"m-2.bin\",\n    \"d\": \"m-2.bin\"\n  }\n}\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

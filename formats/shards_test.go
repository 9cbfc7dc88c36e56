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

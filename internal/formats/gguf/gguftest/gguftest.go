// Package gguftest reads GGUF files with a parser that is not mstore's
// (github.com/gpustack/gguf-parser-go) and compares what it finds with a
// layout mstore parsed or planned: key/values, tensor names, types, shapes
// and offsets. Only tests import it.
package gguftest

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	parser "github.com/gpustack/gguf-parser-go"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/gguf"
)

// Check parses each GGUF file of l, found under dir, with gguf-parser-go
// and reports the first way it disagrees with l and with the key/values
// and version in each file's Meta.
func Check(dir string, l *formats.Layout) error {
	scratch, err := os.MkdirTemp("", "gguftest-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	for i, f := range l.Files {
		if !gguf.Codec.Claims(f.Path) {
			continue
		}
		// gguf-parser-go reads all shards of a split name together; a file
		// is compared on its own, under a plain name.
		p := filepath.Join(scratch, fmt.Sprintf("f%d.gguf", i))
		if err := os.Link(filepath.Join(dir, filepath.FromSlash(f.Path)), p); err != nil {
			b, rerr := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
			if rerr != nil {
				return rerr
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				return err
			}
		}
		got, err := parser.ParseGGUFFile(p, parser.UseMMap())
		if err != nil {
			return fmt.Errorf("%s: gguf-parser-go: %w", f.Path, err)
		}
		if err := compareFile(got, f, l.Tensors); err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
	}
	return nil
}

func compareFile(got *parser.GGUFFile, f formats.File, tensors []formats.Tensor) error {
	if v := fmt.Sprint(uint32(got.Header.Version)); v != f.Meta[gguf.MetaVersion] {
		return fmt.Errorf("version %s, mstore says %s", v, f.Meta[gguf.MetaVersion])
	}
	kvs, err := gguf.DecodeKVs([]byte(f.Meta[gguf.MetaKV]))
	if err != nil {
		return err
	}
	var want []gguf.KV
	for _, kv := range kvs {
		if kv.Key != gguf.KeySplitNo { // gguf-parser-go drops split.no
			want = append(want, kv)
		}
	}
	if len(got.Header.MetadataKV) != len(want) {
		return fmt.Errorf("%d key/values, mstore says %d", len(got.Header.MetadataKV), len(want))
	}
	for i, kv := range got.Header.MetadataKV {
		if err := compareKV(kv, want[i]); err != nil {
			return err
		}
	}
	var exts []formats.Extent
	for _, e := range f.Extents {
		if e.Kind == formats.TensorData {
			exts = append(exts, e)
		}
	}
	if len(got.TensorInfos) != len(exts) {
		return fmt.Errorf("%d tensors, mstore says %d", len(got.TensorInfos), len(exts))
	}
	for i, ti := range got.TensorInfos {
		t := tensors[exts[i].Tensor]
		id, _ := gguf.TypeByName(t.DType)
		dims := make([]uint64, len(t.Shape))
		for j, d := range t.Shape {
			dims[len(t.Shape)-1-j] = uint64(d)
		}
		switch {
		case ti.Name != t.Name:
			return fmt.Errorf("tensor %d is %q, mstore says %q", i, ti.Name, t.Name)
		case uint32(ti.Type) != uint32(id):
			return fmt.Errorf("tensor %q has type %d (%v), mstore says %s", t.Name, ti.Type, ti.Type, t.DType)
		case int(ti.NDimensions) != len(dims) || !reflect.DeepEqual(append([]uint64{}, ti.Dimensions...), dims):
			return fmt.Errorf("tensor %q has dims %v, mstore says shape %v", t.Name, ti.Dimensions, t.Shape)
		case int64(ti.Offset)+got.TensorDataStartOffset != exts[i].Offset:
			return fmt.Errorf("tensor %q at %d+%d, mstore says byte %d", t.Name, got.TensorDataStartOffset, ti.Offset, exts[i].Offset)
		}
	}
	return nil
}

func compareKV(got parser.GGUFMetadataKV, want gguf.KV) error {
	if got.Key != want.Key {
		return fmt.Errorf("key %q, mstore says %q", got.Key, want.Key)
	}
	v := want.Value
	if !v.Array {
		if uint32(got.ValueType) != uint32(v.Type) || !sameElem(got.Value, v, 0) {
			return fmt.Errorf("%s: %v (%v), mstore says %s", want.Key, got.Value, got.ValueType, gguf.EncodeKVs([]gguf.KV{want}))
		}
		return nil
	}
	arr, ok := got.Value.(parser.GGUFMetadataKVArrayValue)
	if !ok || uint32(got.ValueType) != uint32(gguf.TypeArray) || uint32(arr.Type) != uint32(v.Type) || int(arr.Len) != v.Len() || len(arr.Array) != v.Len() {
		return fmt.Errorf("%s: not the array mstore has (%v)", want.Key, got.ValueType)
	}
	for i, e := range arr.Array {
		if !sameElem(e, v, i) {
			return fmt.Errorf("%s[%d]: %v differs", want.Key, i, e)
		}
	}
	return nil
}

func sameElem(got any, v gguf.Value, i int) bool {
	switch g := got.(type) {
	case string: // gguf-parser-go trims white space from every string
		return v.Type == gguf.TypeString && g == strings.TrimSpace(v.Strs[i])
	case bool:
		return v.Type == gguf.TypeBool && g == (v.Uint(i) != 0)
	case float32:
		return v.Type == gguf.TypeFloat32 && uint64(math.Float32bits(g)) == v.Uint(i)
	case float64:
		return v.Type == gguf.TypeFloat64 && math.Float64bits(g) == v.Uint(i)
	case uint8, uint16, uint32, uint64:
		return reflect.ValueOf(g).Uint() == v.Uint(i)
	case int8, int16, int32, int64:
		return reflect.ValueOf(g).Int() == v.Int(i)
	}
	return false
}

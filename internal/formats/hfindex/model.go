package hfindex

import (
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
)

// Kind says how a codec's paths are told apart: its indexes end in
// IndexSuffix, its containers are those IsContainer claims, and the two
// are checked against each other with Names. What and Containers name
// them in messages ("a SafeTensors file or index", ".safetensors files").
type Kind struct {
	Pkg         string
	IndexSuffix string
	IsContainer func(p string) bool
	Names       formats.ShardNames
	What        string
	Containers  string
}

// Model is a sharded model's paths sorted into containers and indexes,
// each index read and its shard names checked against the containers.
type Model struct {
	Containers []string
	IndexPaths []string          // in the order given
	Indexes    map[string]*Index // by path
}

// ReadModel sorts paths into indexes and containers, reads every index
// (indexes first: they are small, and a name that would leave the
// directory is refused before any container is opened) and checks that
// indexes and containers name each other (formats.ShardNames.CheckIndexes).
func ReadModel(dir formats.Dir, paths []string, k Kind) (*Model, error) {
	m := &Model{Indexes: map[string]*Index{}}
	for _, p := range paths {
		switch {
		case strings.HasSuffix(p, k.IndexSuffix):
			m.IndexPaths = append(m.IndexPaths, p)
		case k.IsContainer(p):
			m.Containers = append(m.Containers, p)
		default:
			return nil, errs.New(errs.SchemaError, k.Pkg, "%s is not %s", p, k.What)
		}
	}
	for _, p := range m.IndexPaths {
		idx, err := Read(dir, p, k.Pkg)
		if err != nil {
			return nil, err
		}
		m.Indexes[p] = idx
	}
	shardsOf := func(p string) []string { return m.Indexes[p].Shards }
	if _, err := k.Names.CheckIndexes(k.Pkg, m.Containers, m.IndexPaths, shardsOf, k.IndexSuffix, k.Containers); err != nil {
		return nil, err
	}
	return m, nil
}

// CheckPlacement checks that the weight_map puts each tensor it names in
// the file that holds it (fileOf: tensor name to file) and returns the
// names it maps, for the codec to check that each shard's tensors are all
// named.
func (idx *Index) CheckPlacement(fileOf map[string]string) (map[string]bool, error) {
	named := make(map[string]bool, len(idx.WeightMap))
	for _, m := range idx.WeightMap {
		named[m.Tensor] = true
		got, ok := fileOf[m.Tensor]
		switch {
		case !ok:
			return nil, errs.At(errs.SchemaError, idx.pkg, idx.Path, m.At, "weight_map names tensor %q, which no file holds (expected in %s)", m.Tensor, m.Shard)
		case got != m.Shard:
			return nil, errs.At(errs.SchemaError, idx.pkg, idx.Path, m.At, "weight_map puts tensor %q in %s, but it is in %s", m.Tensor, m.Shard, got)
		}
	}
	return named, nil
}

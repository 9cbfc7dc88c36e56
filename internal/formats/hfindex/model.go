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
	m, err := SortPaths(paths, k)
	if err != nil {
		return nil, err
	}
	if err := m.ReadIndexes(dir, k); err != nil {
		return nil, err
	}
	return m, nil
}

// SortPaths sorts paths into indexes and containers, as ReadModel does,
// reading nothing: a codec that reads its containers while the indexes
// are read (ReadIndexes) knows them from here.
func SortPaths(paths []string, k Kind) (*Model, error) {
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
	return m, nil
}

// ReadIndexes reads every index of m and checks that indexes and
// containers name each other, as ReadModel does after sorting the paths.
func (m *Model) ReadIndexes(dir formats.Dir, k Kind) error {
	for _, p := range m.IndexPaths {
		idx, err := Read(dir, p, k.Pkg)
		if err != nil {
			return err
		}
		m.Indexes[p] = idx
	}
	shardsOf := func(p string) []string { return m.Indexes[p].Shards }
	_, err := k.Names.CheckIndexes(k.Pkg, m.Containers, m.IndexPaths, shardsOf, k.IndexSuffix, k.Containers)
	return err
}

// CheckPlacement checks that the weight_map puts each tensor it names in
// the file that holds it (fileOf: tensor name to file) and returns the
// names it maps, for the codec to check that each shard's tensors are all
// named.
func (idx *Index) CheckPlacement(fileOf map[string]string) (map[string]bool, error) {
	if _, err := idx.Placed(fileOf); err != nil {
		return nil, err
	}
	return idx.Named(), nil
}

// Placed checks that the weight_map puts each tensor it names in the file
// that holds it (fileOf: tensor name to file) and returns how many it
// places in each shard. The weight_map names a tensor once (Parse), so
// when fileOf holds only a model's tensors, each named once, a shard's
// tensors are all named exactly when their number is the count here: no
// map of 19,502 names to build and look up (a MoE's index), as Named
// makes.
func (idx *Index) Placed(fileOf map[string]string) (map[string]int, error) {
	placed := make(map[string]int, len(idx.Shards))
	for _, m := range idx.WeightMap {
		got, ok := fileOf[m.Tensor]
		switch {
		case !ok:
			return nil, errs.At(errs.SchemaError, idx.pkg, idx.Path, m.At, "weight_map names tensor %q, which no file holds (expected in %s)", m.Tensor, m.Shard)
		case got != m.Shard:
			return nil, errs.At(errs.SchemaError, idx.pkg, idx.Path, m.At, "weight_map puts tensor %q in %s, but it is in %s", m.Tensor, m.Shard, got)
		}
		placed[m.Shard]++
	}
	return placed, nil
}

// Named returns the names the weight_map maps.
func (idx *Index) Named() map[string]bool {
	named := make(map[string]bool, len(idx.WeightMap))
	for _, m := range idx.WeightMap {
		named[m.Tensor] = true
	}
	return named
}

package objects

import (
	"slices"
	"sort"
)

// Change is how one tensor or file differs between two versions.
type Change string

const (
	Added     Change = "added"
	Removed   Change = "removed"
	Changed   Change = "changed"
	Unchanged Change = "unchanged"
	// Renamed is a tensor whose bytes (its digest) one version has under
	// another name: a removed and an added tensor paired by content, as a
	// SafeTensors and a GGUF of the same weights name them differently.
	Renamed Change = "renamed"
)

// TensorDiff is one tensor's change, by name.
type TensorDiff struct {
	Name   string `json:"name"`
	Change Change `json:"change"`
	// FromName is the name a Renamed tensor had in the older version.
	FromName string `json:"from_name,omitempty"`
	// FromBytes and ToBytes are the tensor's sizes in each version (0 where
	// absent); DType and Shape show what changed besides the bytes.
	FromBytes int64   `json:"from_bytes"`
	ToBytes   int64   `json:"to_bytes"`
	FromDType string  `json:"from_dtype,omitempty"`
	ToDType   string  `json:"to_dtype,omitempty"`
	FromShape []int64 `json:"from_shape,omitempty"`
	ToShape   []int64 `json:"to_shape,omitempty"`
	// NewChunkBytes is how many of the new version's bytes are in chunks the
	// old tensor does not have: what storing the change costs.
	NewChunkBytes int64 `json:"new_chunk_bytes"`

	digest Digest // of the added or removed tensor's bytes, for pairRenamed
}

// FileDiff is one file's change, by path.
type FileDiff struct {
	Path   string   `json:"path"`
	Role   FileRole `json:"role"`
	Change Change   `json:"change"`
}

// Diff compares two manifests tensor by tensor and file by file.
type Diff struct {
	Tensors []TensorDiff     `json:"tensors"`
	Files   []FileDiff       `json:"files"`
	Count   map[Change]int   `json:"count"`
	Bytes   map[Change]int64 `json:"bytes"` // tensor bytes, in the newer version (older for removed)
}

// Compare returns what changed from a to b. A tensor removed under one name
// and added under another with the same bytes is one Renamed entry, not
// one removed and one added.
func Compare(a, b *Manifest) Diff {
	d := Diff{Count: map[Change]int{}, Bytes: map[Change]int64{}}
	// a's tensors by name (the last of a name, as a map of them would
	// keep) and which of those b names too, as indexes: a diff of two
	// versions of 100,000 tensors held a copy of each tensor in a map
	// grown from empty, and peaked at 200 MB.
	old := make(map[string]int, len(a.Tensors))
	for i, t := range a.Tensors {
		old[t.Name] = i
	}
	seen := make([]bool, len(a.Tensors))
	d.Tensors = make([]TensorDiff, 0, len(b.Tensors))
	for _, t := range b.Tensors {
		td := TensorDiff{Name: t.Name, ToBytes: t.Size, ToDType: t.DType, ToShape: t.Shape, digest: t.Digest}
		i, ok := old[t.Name]
		var o Tensor
		if ok {
			seen[i], o = true, a.Tensors[i]
		}
		switch {
		case !ok:
			td.Change, td.NewChunkBytes = Added, t.Size
		case o.Digest == t.Digest && o.DType == t.DType && slices.Equal(o.Shape, t.Shape):
			td.Change, td.FromBytes, td.FromDType, td.FromShape = Unchanged, o.Size, o.DType, o.Shape
		default:
			td.Change, td.FromBytes, td.FromDType, td.FromShape = Changed, o.Size, o.DType, o.Shape
			td.NewChunkBytes = newChunkBytes(o, t)
		}
		d.Tensors = append(d.Tensors, td)
	}
	for _, t := range a.Tensors {
		if !seen[old[t.Name]] {
			d.Tensors = append(d.Tensors, TensorDiff{Name: t.Name, Change: Removed, FromBytes: t.Size, FromDType: t.DType, FromShape: t.Shape, digest: t.Digest})
		}
	}
	d.Tensors = pairRenamed(d.Tensors)
	sort.Slice(d.Tensors, func(i, j int) bool { return d.Tensors[i].Name < d.Tensors[j].Name })
	for _, t := range d.Tensors {
		d.Count[t.Change]++
		if t.Change == Removed {
			d.Bytes[t.Change] += t.FromBytes
		} else {
			d.Bytes[t.Change] += t.ToBytes
		}
	}

	oldFiles := map[string]File{}
	for _, f := range a.Files {
		oldFiles[f.Path] = f
	}
	for _, f := range b.Files {
		fd := FileDiff{Path: f.Path, Role: f.Role, Change: Added}
		if o, ok := oldFiles[f.Path]; ok {
			fd.Change = Changed
			if o.Digest == f.Digest {
				fd.Change = Unchanged
			}
			delete(oldFiles, f.Path)
		}
		d.Files = append(d.Files, fd)
	}
	for _, f := range a.Files {
		if _, ok := oldFiles[f.Path]; ok {
			d.Files = append(d.Files, FileDiff{Path: f.Path, Role: f.Role, Change: Removed})
		}
	}
	sort.Slice(d.Files, func(i, j int) bool { return d.Files[i].Path < d.Files[j].Path })
	return d
}

// newChunkBytes counts the bytes of b's chunks that a does not have.
func newChunkBytes(a, b Tensor) int64 {
	have := map[Digest]bool{}
	for _, c := range a.Chunks {
		have[c] = true
	}
	var n int64
	for i, c := range b.Chunks {
		if !have[c] {
			_, size := ChunkBounds(b.Size, i)
			n += size
		}
	}
	return n
}

// pairRenamed turns each removed tensor whose digest an added tensor has
// into one Renamed entry. When several tensors share a digest (two zero
// tensors), they pair in name order, the i-th removed with the i-th added.
func pairRenamed(ts []TensorDiff) []TensorDiff {
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	removed := map[Digest][]int{}
	for i, t := range ts {
		if t.Change == Removed {
			removed[t.digest] = append(removed[t.digest], i)
		}
	}
	gone := map[int]bool{}
	for i := range ts {
		t := &ts[i]
		queue := removed[t.digest]
		if t.Change != Added || len(queue) == 0 {
			continue
		}
		from := ts[queue[0]]
		removed[t.digest] = queue[1:]
		gone[queue[0]] = true
		t.Change, t.FromName, t.NewChunkBytes = Renamed, from.Name, 0
		t.FromBytes, t.FromDType, t.FromShape = from.FromBytes, from.FromDType, from.FromShape
	}
	out := ts[:0]
	for i, t := range ts {
		if !gone[i] {
			out = append(out, t)
		}
	}
	return out
}

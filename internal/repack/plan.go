package repack

import (
	"bytes"
	"context"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/bytegroup"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
)

// Item is one blob to code: a raw one, or a grouped one with a delta base
// (Rec.Coded()), which only a smaller delta replaces.
type Item struct {
	Rec   store.BlobRecord
	Width int             // byte planes
	Base  *objects.Digest // delta base, if any
}

// Plan is what a repack codes, decided from one snapshot of the index.
type Plan struct {
	Blobs       int   `json:"blobs"`        // recorded
	AlreadyDone int   `json:"already_done"` // coded by an earlier run
	ToCode      int   `json:"to_code"`
	ToCodeBytes int64 `json:"to_code_bytes"`
	WithBase    int   `json:"with_base"` // of which with a delta base
	// Regrouped counts blobs an earlier run grouped that now have a delta
	// base (theirs was added since, or gc re-coded them on their own):
	// each becomes a delta when that is smaller than it is now.
	Regrouped int `json:"grouped_with_base"`
	// Unreadable lists versions whose manifest cannot be read: their blobs
	// are still coded, with one plane and no base.
	Unreadable []string `json:"unreadable"`

	items []Item
	seen  map[objects.Digest]store.BlobRecord // every record, as planned
}

// version is what the plan knows of one manifest.
type version struct {
	digest objects.Digest
	m      *objects.Manifest
	first  time.Time // its oldest history entry
	prev   objects.Digest
}

// NewPlan reads the index and decides what to code and against which base.
func NewPlan(ctx context.Context, st *store.Store) (*Plan, error) {
	p := &Plan{Unreadable: []string{}, seen: map[objects.Digest]store.BlobRecord{}}
	versions := map[objects.Digest]*version{}
	err := st.View(func(tx *bolt.Tx) error {
		err := store.ForEachManifest(tx, func(d objects.Digest) error {
			m, err := st.Manifest(tx, d)
			if err != nil {
				p.Unreadable = append(p.Unreadable, d.String())
				return nil
			}
			versions[d] = &version{digest: d, m: m}
			return nil
		})
		if err != nil {
			return err
		}
		list, err := refs.List(tx)
		if err != nil {
			return errs.Wrap(errs.IntegrityError, "repack", err, "cannot read the refs (run `mstore fsck`)")
		}
		for _, ref := range list {
			hist, err := refs.History(tx, ref.Name)
			if err != nil {
				return errs.Wrap(errs.IntegrityError, "repack", err, "cannot read the history of %s (run `mstore fsck`)", ref.Name)
			}
			for _, e := range hist {
				v := versions[e.Digest]
				if v == nil {
					continue
				}
				if v.first.IsZero() || e.Time.Before(v.first) {
					v.first = e.Time
					if e.Previous != e.Digest {
						v.prev = e.Previous
					}
				}
			}
		}
		// `add --base REF` names the base version outright.
		for d, base := range store.DeltaBaseHints(tx) {
			if v := versions[d]; v != nil {
				v.prev = base
			}
		}
		return store.ForEachBlob(tx, func(r store.BlobRecord) error {
			p.seen[r.Digest] = r
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.Blobs = len(p.seen)
	widths, bases := chooseBases(versions, p.seen)
	for _, d := range sortedDigests(p.seen) {
		r := p.seen[d]
		b, hasBase := bases[d]
		if r.Coding == store.CodingDelta || r.Coding == store.CodingGrouped && !hasBase {
			p.AlreadyDone++
			continue
		}
		if r.Size == 0 {
			continue
		}
		it := Item{Rec: r, Width: max(widths[d], 1)}
		if hasBase {
			it.Base = &b
			p.WithBase++
		}
		if r.Coded() {
			p.Regrouped++
		}
		p.items = append(p.items, it)
		p.ToCode++
		p.ToCodeBytes += r.Size
	}
	return p, nil
}

// chooseBases returns the plane count of every blob the manifests name and
// a delta base for the tensor chunks that have one, depth 1.
func chooseBases(versions map[objects.Digest]*version, recs map[objects.Digest]store.BlobRecord) (map[objects.Digest]int, map[objects.Digest]objects.Digest) {
	order := make([]*version, 0, len(versions))
	for _, v := range versions {
		order = append(order, v)
	}
	sort.Slice(order, func(i, j int) bool {
		if !order[i].first.Equal(order[j].first) {
			return order[i].first.Before(order[j].first)
		}
		return bytes.Compare(order[i].digest[:], order[j].digest[:]) < 0
	})
	type key struct {
		name, dtype string
		size        int64
	}
	oldest := map[key]*objects.Tensor{} // the first version's tensor of each name
	widths := map[objects.Digest]int{}
	bases := map[objects.Digest]objects.Digest{}
	find := func(m *objects.Manifest, k key) *objects.Tensor {
		for i := range m.Tensors {
			t := &m.Tensors[i]
			if t.Name == k.name && t.DType == k.dtype && t.Size == k.size {
				return t
			}
		}
		return nil
	}
	for _, v := range order {
		for i := range v.m.Tensors {
			t := &v.m.Tensors[i]
			w := bytegroup.WidthOf(t.DType)
			for _, c := range t.Chunks {
				if _, ok := widths[c]; !ok {
					widths[c] = w
				}
			}
			k := key{t.Name, t.DType, t.Size}
			var base *objects.Tensor
			if pv := versions[v.prev]; pv != nil {
				base = find(pv.m, k)
			}
			if base == nil || base.Digest == t.Digest {
				base = oldest[k]
			}
			if oldest[k] == nil {
				oldest[k] = t
			}
			if base == nil || base.Digest == t.Digest || len(base.Chunks) != len(t.Chunks) {
				continue
			}
			for j, c := range t.Chunks {
				if b := base.Chunks[j]; b != c {
					if _, ok := bases[c]; !ok {
						bases[c] = b
					}
				}
			}
		}
		for _, f := range v.m.Files {
			for _, e := range f.Extents {
				if e.Data != nil {
					for _, c := range e.Data.Chunks {
						if _, ok := widths[c]; !ok {
							widths[c] = 1
						}
					}
				}
			}
		}
	}
	return widths, depthOne(bases, recs)
}

// depthOne makes the chosen bases a depth-1 forest: a base that is a delta
// already is replaced by its own base; a blob that is any delta's base
// (chosen now, or recorded by an earlier run) is made no delta; a base the
// index does not hold, or of another size, is dropped.
func depthOne(bases map[objects.Digest]objects.Digest, recs map[objects.Digest]store.BlobRecord) map[objects.Digest]objects.Digest {
	for c, b := range bases {
		br, ok := recs[b]
		if ok && br.Coding == store.CodingDelta {
			b = br.Base
			br, ok = recs[b]
		}
		if !ok || b == c || br.Size != recs[c].Size || br.Coding == store.CodingDelta {
			delete(bases, c)
			continue
		}
		bases[c] = b
	}
	isBase := map[objects.Digest]bool{}
	for _, r := range recs {
		if r.Coding == store.CodingDelta {
			isBase[r.Base] = true
		}
	}
	// Keep deltas in digest order; a blob chosen as a base first stays one.
	for _, c := range sortedDigests(bases) {
		if isBase[c] {
			delete(bases, c)
			continue
		}
		isBase[bases[c]] = true
	}
	for c := range bases {
		if isBase[c] {
			delete(bases, c)
		}
	}
	return bases
}

func sortedDigests[V any](m map[objects.Digest]V) []objects.Digest {
	out := make([]objects.Digest, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i][:], out[j][:]) < 0 })
	return out
}

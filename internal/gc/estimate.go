package gc

import (
	"context"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
)

// referenced is what a plan keeps: every version a name reaches, or, for an
// estimate, what would still be reached once w is done.
func referenced(tx *bolt.Tx, w *refs.Without) (map[objects.Digest]bool, error) {
	if w == nil {
		return refs.Referenced(tx)
	}
	kept, _, err := refs.Holders(tx, *w)
	if err != nil {
		return nil, err
	}
	out := make(map[objects.Digest]bool, len(kept))
	for d := range kept {
		out[d] = true
	}
	return out, nil
}

// Estimate is what a change to the names (rm, trim, or every name of one
// version gone) would let gc free, from two plans made as gc makes them:
// one of the store as it is, one as if the change were made. Nothing is
// changed.
type Estimate struct {
	// GCFreesNow is what `mstore gc` would free today, GCFreesAfter what it
	// would free after the change; FreesBytes is the difference: the bytes
	// on disk the change itself lets gc free (blob files, packs shrunk by a
	// repack, manifests).
	GCFreesNow   int64 `json:"gc_frees_now"`
	GCFreesAfter int64 `json:"gc_frees_after"`
	FreesBytes   int64 `json:"frees_bytes"`
	// FreesBlobs and FreesRawBytes count the blobs that would go with the
	// change, and their raw (uncoded) bytes.
	FreesBlobs    int   `json:"frees_blobs"`
	FreesRawBytes int64 `json:"frees_raw_bytes"`
	// Unnamed are the versions that no name would keep any more; KeptAlive
	// those the change takes a name from that other names still keep.
	Unnamed   []objects.Digest `json:"unnamed"`
	KeptAlive []KeptVersion    `json:"kept_alive"`
	// Unreadable is set when a named version cannot be read: gc then keeps
	// every blob, and frees nothing of what the change would unname.
	Unreadable []Unreadable `json:"unreadable"`

	dead map[objects.Digest]bool // blob records gc would remove after the change
}

// KeptVersion is a version the change takes a name from, with the names
// that keep it alive all the same.
type KeptVersion struct {
	Version objects.Digest `json:"version"`
	By      []string       `json:"by"`
}

// EstimateWithout plans gc twice, under the store's shared lock (it reads, as a
// checkout does), and compares the plans. A ref or tag in w that does not
// exist is not_found, as the change itself would be. Names moved between
// the two plans (a tag made meanwhile) can skew the figures, never the
// store.
func EstimateWithout(ctx context.Context, st *store.Store, w refs.Without, opts Options) (*Estimate, error) {
	lock, err := st.Lock(store.LockShared, opts.LockWait)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	var kept, dropped map[objects.Digest][]refs.Holder
	err = st.View(func(tx *bolt.Tx) error {
		if err := refs.CheckWithout(tx, w); err != nil {
			return err
		}
		kept, dropped, err = refs.Holders(tx, w)
		return err
	})
	if err != nil {
		return nil, err
	}
	now, err := NewPlan(ctx, st, opts)
	if err != nil {
		return nil, err
	}
	opts.without = &w
	after, err := NewPlan(ctx, st, opts)
	if err != nil {
		return nil, err
	}
	e := &Estimate{GCFreesNow: now.FreedBytes, GCFreesAfter: after.FreedBytes, FreesBytes: max(after.FreedBytes-now.FreedBytes, 0),
		Unnamed: []objects.Digest{}, KeptAlive: []KeptVersion{}, Unreadable: after.Unreadable, dead: map[objects.Digest]bool{}}
	deadNow := map[objects.Digest]bool{}
	for _, batch := range now.dead.batches {
		for _, r := range batch {
			deadNow[r.Digest] = true
		}
	}
	for _, batch := range after.dead.batches {
		for _, r := range batch {
			e.dead[r.Digest] = true
			if !deadNow[r.Digest] {
				e.FreesBlobs++
				e.FreesRawBytes += r.Size
			}
		}
	}
	for _, d := range sortedDigests(dropped) {
		if by, ok := kept[d]; ok {
			e.KeptAlive = append(e.KeptAlive, KeptVersion{Version: d, By: holderNames(by)})
		} else {
			e.Unnamed = append(e.Unnamed, d)
		}
	}
	return e, nil
}

func holderNames(hs []refs.Holder) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.String()
	}
	sort.Strings(out)
	return out
}

// VersionUsage is how one version's bytes stand in the store.
type VersionUsage struct {
	Version objects.Digest `json:"version"`
	// LogicalBytes is the size of its files, as checkout writes them.
	LogicalBytes int64 `json:"logical_bytes"`
	// Blobs and BlobBytes are its distinct blobs and their raw bytes (less
	// than LogicalBytes when it repeats bytes or has zero padding). Of them,
	// UniqueBytes are in blobs no other named version needs and SharedBytes
	// in blobs some other named version needs too.
	Blobs       int   `json:"blobs"`
	BlobBytes   int64 `json:"blob_bytes"`
	UniqueBlobs int   `json:"unique_blobs"`
	UniqueBytes int64 `json:"unique_bytes"`
	SharedBytes int64 `json:"shared_bytes"`
	// HeldBy lists the names that keep it (NAME, NAME~N, NAME:TAG); none
	// means gc frees it already.
	HeldBy []string `json:"held_by"`
	// IfUnnamed is what removing every name of HeldBy would let gc free.
	IfUnnamed *Estimate `json:"if_unnamed"`
}

// UsageOf says how the version d shares its bytes with the other named
// versions, and what gc would free once no name keeps it, from the gc
// planner's own marks.
func UsageOf(ctx context.Context, st *store.Store, d objects.Digest, m *objects.Manifest, opts Options) (*VersionUsage, error) {
	est, err := EstimateWithout(ctx, st, refs.Without{Versions: map[objects.Digest]bool{d: true}}, opts)
	if err != nil {
		return nil, err
	}
	u := &VersionUsage{Version: d, LogicalBytes: m.LogicalBytes(), HeldBy: []string{}, IfUnnamed: est}
	var recs map[objects.Digest]store.BlobRecord
	err = st.View(func(tx *bolt.Tx) error {
		if recs, err = store.LookupRecords(tx, m.Blobs()); err != nil {
			return err
		}
		_, dropped, err := refs.Holders(tx, refs.Without{Versions: map[objects.Digest]bool{d: true}})
		u.HeldBy = append(u.HeldBy, holderNames(dropped[d])...)
		return err
	})
	if err != nil {
		return nil, err
	}
	for b, r := range recs {
		u.Blobs++
		u.BlobBytes += r.Size
		if est.dead[b] {
			u.UniqueBlobs++
			u.UniqueBytes += r.Size
		} else {
			u.SharedBytes += r.Size
		}
	}
	return u, nil
}

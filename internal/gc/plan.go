package gc

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
)

// DefaultGrace is how old a file the index does not record must be before
// gc deletes it.
const DefaultGrace = time.Hour

// Failpoints of a gc run, in order.
const (
	FailAfterMark   = "gc-after-mark"   // the plan is made, nothing changed
	FailAfterRepack = "gc-after-repack" // new packs are durable, not recorded
	FailAfterCommit = "gc-after-commit" // the index no longer records what goes
	FailAfterDelete = "gc-after-delete" // the first file is deleted
)

// Options say how gc runs.
type Options struct {
	// Grace keeps files the index does not record until they are this old.
	// Zero means DefaultGrace; a negative value keeps none.
	Grace time.Duration
	// LockWait bounds the wait for running adds and checkouts; zero means
	// the store's LockTimeout.
	LockWait time.Duration
	// DryRun makes Run stop after the plan.
	DryRun bool
	// Now is the clock the grace period is measured with; nil is time.Now.
	Now func() time.Time

	// without, set only by Estimate, plans as if these names were gone; such
	// a plan is never executed.
	without *refs.Without
}

// File is a file a plan deletes or keeps.
type File struct {
	Path   string `json:"path"` // relative to the store directory
	Size   int64  `json:"size"`
	Reason string `json:"reason"`
}

// Repack is a pack whose live blobs move to a new pack.
type Repack struct {
	Pack      string `json:"pack"`
	Path      string `json:"path"`
	Size      int64  `json:"size"`
	LiveBlobs int    `json:"live_blobs"`
	LiveBytes int64  `json:"live_bytes"`
}

// Plan is what a gc does, decided from one snapshot of the index and one
// walk of the store's files, taken under the exclusive lock.
type Plan struct {
	Manifests  int   `json:"manifests"` // in the store
	Reachable  int   `json:"reachable"` // kept: named by a ref's history or a tag
	LiveBlobs  int   `json:"live_blobs"`
	LiveBytes  int64 `json:"live_bytes"`
	FreedBlobs int   `json:"freed_blobs"` // blob records removed
	FreedBytes int64 `json:"freed_bytes"` // bytes of files deleted or shrunk away

	RemoveManifests []objects.Digest `json:"remove_manifests"`
	DeleteFiles     []File           `json:"delete_files"` // dead loose blobs and dead packs
	Repacks         []Repack         `json:"repacks"`
	Orphans         []File           `json:"orphans"`      // unrecorded, older than the grace period
	KeptOrphans     []File           `json:"kept_orphans"` // unrecorded, younger
	Missing         []objects.Digest `json:"missing"`      // live blobs without a record or a file
	// Unreadable lists the named versions whose manifest cannot be read.
	// Which blobs they need is unknown, so while there is one, no blob
	// record or blob file is removed (KeptAllBlobs): gc never deletes on
	// uncertainty. The rest (versions no name reaches, files the index
	// does not record) is still done, and gc then fails naming them.
	Unreadable   []Unreadable `json:"unreadable"`
	KeptAllBlobs bool         `json:"kept_all_blobs"`
	// Reencoded counts the deltas coded again without their base, so that
	// a base no version needs any more can go.
	Reencoded int `json:"reencoded_deltas"`

	deadRecords []store.BlobRecord
	repackRecs  []store.BlobRecord // live records in packs to repack, in pack and offset order
	// reencode holds the live deltas whose base no version needs any
	// more: they are coded again on their own, and the base goes.
	reencode    []store.BlobRecord
	oldPacks    []string         // absolute paths of the packs repacked
	deletePaths []string         // absolute paths of DeleteFiles then Orphans
	sizes       map[string]int64 // of every path to delete
	manifestSet map[objects.Digest]bool
	// hypothetical marks a plan made with Options.without: Execute refuses it.
	hypothetical bool
}

// Unreadable is a named version whose manifest gc could not read.
type Unreadable struct {
	Version objects.Digest `json:"version"`
	Error   string         `json:"error"`
}

// Run takes the store's lock exclusive, makes the plan and, unless
// opts.DryRun, executes it.
func Run(ctx context.Context, st *store.Store, opts Options) (*Plan, *Result, error) {
	lock, err := st.Lock(store.LockExclusive, opts.LockWait)
	if err != nil {
		return nil, nil, err
	}
	defer lock.Unlock()
	p, err := NewPlan(ctx, st, opts)
	if err != nil {
		return nil, nil, err
	}
	store.Failpoint(FailAfterMark)
	if opts.DryRun {
		return p, nil, nil
	}
	res, err := p.Execute(ctx, st)
	return p, res, err
}

// NewPlan marks and plans the sweep. The caller holds the exclusive lock.
func NewPlan(ctx context.Context, st *store.Store, opts Options) (*Plan, error) {
	p := &Plan{RemoveManifests: []objects.Digest{}, DeleteFiles: []File{}, Repacks: []Repack{},
		Orphans: []File{}, KeptOrphans: []File{}, Missing: []objects.Digest{}, Unreadable: []Unreadable{}, manifestSet: map[objects.Digest]bool{}, sizes: map[string]int64{},
		hypothetical: opts.without != nil}
	live := map[objects.Digest]bool{}
	recs := map[objects.Digest]store.BlobRecord{}
	err := st.View(func(tx *bolt.Tx) error {
		reachable, err := referenced(tx, opts.without)
		if err != nil {
			return errs.Wrap(errs.IntegrityError, "gc", err, "cannot read the refs; nothing was deleted (run `mstore fsck`)")
		}
		for _, d := range sortedDigests(reachable) {
			if err := ctx.Err(); err != nil {
				return err
			}
			m, err := st.Manifest(tx, d)
			if err != nil {
				// What it needs is unknown: every blob stays (below).
				p.Unreadable = append(p.Unreadable, Unreadable{Version: d, Error: err.Error()})
				continue
			}
			live[d] = true // the manifest's own blob copy
			for _, b := range m.Blobs() {
				live[b] = true
			}
		}
		err = store.ForEachManifest(tx, func(d objects.Digest) error {
			p.manifestSet[d] = true
			if !reachable[d] {
				p.RemoveManifests = append(p.RemoveManifests, d)
			}
			return nil
		})
		if err != nil {
			return err
		}
		p.Manifests, p.Reachable = len(p.manifestSet), len(reachable)
		err = store.ForEachBlob(tx, func(r store.BlobRecord) error {
			recs[r.Digest] = r
			return nil
		})
		if err != nil {
			return errs.Wrap(errs.IntegrityError, "gc", err, "cannot read the blob records; nothing was deleted (run `mstore fsck`)")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(p.Unreadable) > 0 {
		p.KeptAllBlobs = true
		for d := range recs {
			live[d] = true
		}
	}
	p.keepBases(live, recs)
	if err := p.sweep(st, opts, live, recs); err != nil {
		return nil, err
	}
	return p, nil
}

// keepBases never lets a live delta lose its base: a base some version
// still needs stays as it is; a base only deltas need goes, and each of its
// live deltas is coded again without it first (Execute, in the same
// transaction that removes the base's record). A delta whose base the index
// lacks cannot be read: its base is reported missing.
func (p *Plan) keepBases(live map[objects.Digest]bool, recs map[objects.Digest]store.BlobRecord) {
	for _, d := range sortedDigests(recs) {
		r := recs[d]
		if r.Coding != store.CodingDelta || !live[d] || live[r.Base] {
			continue
		}
		if _, ok := recs[r.Base]; !ok {
			p.Missing = append(p.Missing, r.Base)
			continue
		}
		p.reencode = append(p.reencode, r)
	}
	p.Reencoded = len(p.reencode)
}

// sweep decides, from the marks and the files on disk, what goes.
func (p *Plan) sweep(st *store.Store, opts Options, live map[objects.Digest]bool, recs map[objects.Digest]store.BlobRecord) error {
	grace := opts.Grace
	if grace == 0 {
		grace = DefaultGrace
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	cutoff := now().Add(-max(grace, 0))

	loose := map[objects.Digest]store.StoredFile{}
	packs := map[store.PackID]store.StoredFile{}
	var unrecorded []store.StoredFile
	err := st.WalkFiles(func(f store.StoredFile) error {
		switch f.Kind {
		case store.FileLoose:
			if r, ok := recs[f.Digest]; ok && r.Encoding == store.EncodingRaw {
				loose[f.Digest] = f
				return nil
			}
			unrecorded = append(unrecorded, f)
		case store.FilePack:
			packs[f.Pack] = f
		case store.FileTemp:
			unrecorded = append(unrecorded, f)
		}
		return nil // FileUnknown: not ours, never deleted
	})
	if err != nil {
		return fmt.Errorf("gc: %w; nothing was deleted", err)
	}

	for d := range live {
		if _, ok := recs[d]; !ok && !p.KeptAllBlobs {
			p.Missing = append(p.Missing, d)
		}
	}
	livePacked := map[store.PackID][]store.BlobRecord{}
	recordedPacks := map[store.PackID]bool{}
	reencoded := map[objects.Digest]bool{}
	for _, r := range p.reencode {
		reencoded[r.Digest] = true
	}
	for _, d := range sortedDigests(recs) {
		r := recs[d]
		if r.Encoding == store.EncodingPacked {
			recordedPacks[r.Pack] = true
		}
		switch {
		case !live[d]:
			p.deadRecords = append(p.deadRecords, r)
			if f, ok := loose[d]; ok {
				p.deleteFile(f, "no named version needs this blob")
			}
		case r.Encoding == store.EncodingRaw:
			p.LiveBlobs++
			p.LiveBytes += r.Size
			if _, ok := loose[d]; !ok {
				p.Missing = append(p.Missing, d)
			}
		default:
			p.LiveBlobs++
			p.LiveBytes += r.Size
			if _, ok := packs[r.Pack]; !ok {
				p.Missing = append(p.Missing, d)
				continue
			}
			if !reencoded[d] { // its copy here dies: a new one is written
				livePacked[r.Pack] = append(livePacked[r.Pack], r)
			}
		}
	}
	p.FreedBlobs = len(p.deadRecords)

	for _, id := range sortedPacks(packs) {
		f := packs[id]
		liveRecs := livePacked[id]
		var liveBytes int64
		for _, r := range liveRecs {
			liveBytes += r.StoredSize()
		}
		switch {
		case !recordedPacks[id]:
			unrecorded = append(unrecorded, f)
		case len(liveRecs) == 0:
			p.deleteFile(f, "no live blob in this pack")
		case liveBytes < f.Size:
			sort.Slice(liveRecs, func(i, j int) bool { return liveRecs[i].Offset < liveRecs[j].Offset })
			p.Repacks = append(p.Repacks, Repack{Pack: id.String(), Path: f.Rel, Size: f.Size, LiveBlobs: len(liveRecs), LiveBytes: liveBytes})
			p.repackRecs = append(p.repackRecs, liveRecs...)
			p.oldPacks = append(p.oldPacks, f.Path)
			p.sizes[f.Path] = f.Size
			p.FreedBytes += f.Size - liveBytes
		}
	}

	for _, f := range unrecorded {
		reason := map[store.FileKind]string{store.FileTemp: "temp file", store.FileLoose: "blob file the index does not record",
			store.FilePack: "pack the index does not record"}[f.Kind]
		if f.ModTime.After(cutoff) {
			p.KeptOrphans = append(p.KeptOrphans, File{Path: f.Rel, Size: f.Size, Reason: reason + ", younger than the grace period"})
			continue
		}
		p.Orphans = append(p.Orphans, File{Path: f.Rel, Size: f.Size, Reason: reason})
		p.deletePaths = append(p.deletePaths, f.Path)
		p.sizes[f.Path] = f.Size
		p.FreedBytes += f.Size
	}
	sort.Slice(p.Missing, func(i, j int) bool { return bytes.Compare(p.Missing[i][:], p.Missing[j][:]) < 0 })
	return nil
}

func (p *Plan) deleteFile(f store.StoredFile, reason string) {
	p.DeleteFiles = append(p.DeleteFiles, File{Path: f.Rel, Size: f.Size, Reason: reason})
	p.deletePaths = append(p.deletePaths, f.Path)
	p.sizes[f.Path] = f.Size
	p.FreedBytes += f.Size
}

func sortedDigests[V any](m map[objects.Digest]V) []objects.Digest {
	out := make([]objects.Digest, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i][:], out[j][:]) < 0 })
	return out
}

func sortedPacks[V any](m map[store.PackID]V) []store.PackID {
	out := make([]store.PackID, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i][:], out[j][:]) < 0 })
	return out
}

package gc

import (
	"context"
	"errors"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
)

// Result is what a gc did.
type Result struct {
	RemovedManifests int   `json:"removed_manifests"`
	FreedBlobs       int   `json:"freed_blobs"`
	FreedBytes       int64 `json:"freed_bytes"`
	DeletedFiles     int   `json:"deleted_files"`
	RepackedPacks    int   `json:"repacked_packs"`
	// FailedDeletes lists the files gc could not delete (they stay, as
	// leftovers; gc then fails).
	FailedDeletes []string `json:"failed_deletes"`
}

// Execute carries out the plan. The caller holds the exclusive lock it was
// made under. A failure before the index commit changes nothing and
// returns no Result. One in a later batch of removals returns none either:
// the versions are gone, every file stays, and the next gc removes the
// dead records left. Execute fails when a delete fails (after trying every
// other one) and when a blob a named version needs is missing (after doing
// the rest: nothing gc frees could bring it back). Deletes are not synced:
// a delete lost in a power failure brings back an unrecorded file, which
// the next gc deletes.
func (p *Plan) Execute(ctx context.Context, st *store.Store) (*Result, error) {
	if p.hypothetical {
		return nil, errors.New("gc: a plan made for an estimate (names that are still there taken away) is never executed")
	}
	res := &Result{FailedDeletes: []string{}}
	newRecs, err := p.repack(ctx, st)
	if err != nil {
		return nil, err
	}
	store.Failpoint(FailAfterRepack)
	if committed, err := p.commit(st, newRecs); err != nil {
		if !committed {
			// The new packs are recorded nowhere: remove them (a crash
			// here would leave them as leftovers for the next gc).
			for _, path := range packPaths(st, newRecs) {
				st.RemoveFile(path)
			}
		}
		return nil, err
	}
	res.RemovedManifests, res.FreedBlobs, res.RepackedPacks = len(p.RemoveManifests), p.FreedBlobs, len(p.Repacks)
	store.Failpoint(FailAfterCommit)

	// Never delete a file the repack has just written (a blob it wrote
	// loose under the name of an unrecorded copy).
	written := map[string]bool{}
	for _, path := range packPaths(st, newRecs) {
		written[path] = true
	}
	var paths []string
	for _, path := range append(append([]string{}, p.deletePaths...), p.oldPacks...) {
		if !written[path] {
			paths = append(paths, path)
		}
	}
	var failed []error
	res.FreedBytes = p.FreedBytes
	for i, path := range paths {
		if err := ctx.Err(); err != nil {
			for _, left := range paths[i:] {
				res.FreedBytes -= p.sizes[left]
			}
			return res, fmt.Errorf("gc: interrupted with %d of %d files deleted (the index no longer records the others: the next gc deletes them): %w",
				i-len(res.FailedDeletes), len(paths), err)
		}
		if err := st.RemoveFile(path); err != nil {
			failed = append(failed, err)
			res.FailedDeletes = append(res.FailedDeletes, path)
			res.FreedBytes -= p.sizes[path] // a pack that stays also keeps its new copy
			continue
		}
		res.DeletedFiles++
		store.Failpoint(FailAfterDelete)
	}
	if len(failed) > 0 {
		return res, fmt.Errorf("gc: %d of %d deletes failed (the files stay; the index no longer records them, so the next gc deletes them): %w",
			len(res.FailedDeletes), len(paths), errors.Join(failed...))
	}
	if len(p.Unreadable) > 0 {
		var names []string
		for _, u := range p.Unreadable {
			names = append(names, u.Version.String())
		}
		return res, errs.New(errs.IntegrityError, "gc", "version(s) %s are named but cannot be read (%s); gc removed what no name reaches and kept every blob, "+
			"since it cannot tell which ones they need (run `mstore fsck`)", strings.Join(names, ", "), p.Unreadable[0].Error)
	}
	if len(p.Missing) > 0 {
		return res, errs.New(errs.IntegrityError, "gc", "%d blob(s) that named versions need are missing, e.g. %s (run `mstore fsck`)",
			len(p.Missing), p.Missing[0].Short())
	}
	return res, nil
}

// repack copies the live blobs of the packs to repack into new packs, made
// durable under their final names, and returns their records. Each blob is
// read back with its digest checked: a corrupt live blob stops gc before
// anything changes.
func (p *Plan) repack(ctx context.Context, st *store.Store) ([]store.BlobRecord, error) {
	if len(p.repackRecs) == 0 && len(p.reencode) == 0 {
		return nil, nil
	}
	r := st.NewBlobReader()
	defer r.Close()
	w := st.NewBlobWriter(nil)
	defer w.Abort()
	var buf []byte
	for _, rec := range p.repackRecs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Moved as kept on disk (coded stays coded), checked on the way.
		b, err := r.ReadStored(rec, buf)
		if err != nil {
			return nil, errs.Wrap(errs.IntegrityError, "gc", err, "repacking pack %s: nothing was deleted (run `mstore fsck`)", rec.Pack)
		}
		buf = b
		if _, err := w.PutStored(rec, b); err != nil {
			return nil, fmt.Errorf("gc: repack: %w", err)
		}
	}
	for _, rec := range p.reencode {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		nrec, b, err := r.Standalone(rec)
		if err != nil {
			return nil, errs.Wrap(errs.IntegrityError, "gc", err, "coding delta %s without its base: nothing was deleted (run `mstore fsck`)", rec.Digest.Short())
		}
		if _, err := w.PutStored(nrec, b); err != nil {
			return nil, fmt.Errorf("gc: re-encode: %w", err)
		}
	}
	recs, err := w.Commit()
	if err != nil {
		return nil, fmt.Errorf("gc: repack: %w", err)
	}
	return recs, nil
}

// commit removes the plan's manifests and records and moves the repacked
// records, in a transaction that first checks that the store is still as
// the plan saw it, then the rest of the dead records in transactions of
// their own. committed reports whether the first transaction (the
// versions, the repack's records) did; after the error of a later batch no
// file may be deleted: the records it did not remove still name them.
func (p *Plan) commit(st *store.Store, newRecs []store.BlobRecord) (committed bool, err error) {
	old := make(map[objects.Digest]store.BlobRecord, len(p.repackRecs)+len(p.reencode))
	for _, r := range append(append([]store.BlobRecord{}, p.repackRecs...), p.reencode...) {
		old[r.Digest] = r
	}
	if len(newRecs) != len(old) {
		return false, fmt.Errorf("gc: repack wrote %d blobs, want %d", len(newRecs), len(old))
	}
	// The dead records go in batches that each keep to a range of the key
	// space (store.Batcher): removed in one transaction, those of 8
	// versions of 100,000 blobs from a store of 16 changed every page of
	// the index at once, and gc peaked at 720 MB. The first batch goes with
	// the manifests; the rest are records no version left needs, so a
	// crash between two batches leaves only what fsck calls unreferenced
	// and the next gc removes (files are deleted after the last batch).
	// Each batch is let go once removed: held to the end, the prints (38
	// MB for 800,008 records) were live while every transaction made its
	// garbage, and the heap grew to twice them and the rest.
	batches := p.dead.batches
	p.dead.batches = nil
	first := []store.RecordPrint{}
	if len(batches) > 0 {
		first, batches[0] = batches[0], nil
		batches = batches[1:]
	}
	err = st.Update(func(tx *bolt.Tx) error {
		reachable, err := refs.Referenced(tx)
		if err != nil {
			return errs.Wrap(errs.IntegrityError, "gc", err, "cannot read the refs; nothing was deleted")
		}
		var named []string
		for _, d := range p.RemoveManifests {
			if reachable[d] {
				named = append(named, d.Short())
			}
		}
		if len(named) > 0 {
			return errs.New(errs.Conflict, "gc", "version(s) %s were named again (tag or ref) while gc ran; nothing was deleted; run gc again",
				strings.Join(named, ", "))
		}
		var added bool
		err = store.ForEachManifest(tx, func(d objects.Digest) error {
			added = added || !p.manifestSet[d]
			return nil
		})
		if err != nil {
			return err
		}
		if added {
			return errs.New(errs.Conflict, "gc", "a version was added while gc ran; nothing was deleted; run gc again")
		}
		for _, d := range p.RemoveManifests {
			if err := store.RemoveManifest(tx, d); err != nil {
				return err
			}
		}
		if err := store.RemoveBlobRecords(tx, first); err != nil {
			return err
		}
		return store.ReplaceBlobRecords(tx, old, newRecs)
	})
	if err != nil {
		return false, err
	}
	first = nil
	for i, b := range batches {
		store.Failpoint(FailBetweenRemovals)
		if err := st.Update(func(tx *bolt.Tx) error { return store.RemoveBlobRecords(tx, b) }); err != nil {
			return true, fmt.Errorf("%w (the versions and some unneeded blob records are removed, no file is: the next gc removes the rest)", err)
		}
		batches[i] = nil
	}
	return true, nil
}

func packPaths(st *store.Store, recs []store.BlobRecord) []string {
	seen := map[store.PackID]bool{}
	var out []string
	for _, r := range recs {
		switch {
		case r.Encoding == store.EncodingRaw:
			out = append(out, st.BlobPath(r.Digest))
		case !seen[r.Pack]:
			seen[r.Pack] = true
			out = append(out, st.PackPath(r.Pack))
		}
	}
	return out
}

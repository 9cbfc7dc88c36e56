package transfer

import (
	"context"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/store"
)

// HealResult is what Heal fetched.
type HealResult struct {
	Blobs     int   `json:"blobs"`
	Bytes     int64 `json:"bytes"`
	Manifests int   `json:"manifests"`
}

// Heal re-fetches from r the blobs of a damaged store that are missing or
// corrupt (blobs: digest → the size its manifests expect) and the
// manifests it lacks, each verified before it is written. A blob the index
// records gets its record pointed at the new copy; one it lacks is
// recorded; a fetched manifest is recorded once every blob it needs is.
// Everything is committed in one transaction at the end.
func Heal(ctx context.Context, st *store.Store, r remote.Remote, blobs map[objects.Digest]int64, manifests []objects.Digest, jobs int) (*HealResult, error) {
	if jobs <= 0 {
		jobs = DefaultJobs
	}
	lock, err := st.Lock(store.LockShared, 0)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	res := &HealResult{}
	sizes := map[objects.Digest]int64{}
	for d, n := range blobs {
		sizes[d] = n
	}
	type fetched struct {
		d       objects.Digest
		encoded []byte
	}
	var mans []fetched
	for _, d := range manifests {
		enc, err := r.GetManifest(ctx, d)
		if err != nil {
			return nil, err
		}
		m, err := remote.CheckManifest(d, enc)
		if err != nil {
			return nil, err
		}
		mans = append(mans, fetched{d, enc})
		var missing []objects.Digest
		if err := st.View(func(tx *bolt.Tx) error {
			missing = store.MissingBlobs(tx, m.Blobs())
			return nil
		}); err != nil {
			return nil, err
		}
		all := remote.BlobSizes(m)
		for _, b := range missing {
			sizes[b] = all[b]
		}
	}
	ds := make([]objects.Digest, 0, len(sizes))
	for d := range sizes {
		ds = append(ds, d)
	}
	// Raw: a healed blob must not lean on a local delta base, which may be
	// what is damaged.
	recs, _, err := fetchRound(ctx, st, r, planJobs(ds, sizes), sizes, jobs, false, nil)
	if err != nil {
		return nil, err
	}
	var copyRecs []store.BlobRecord // the manifests' blob copies
	for _, m := range mans {
		rs, err := st.WriteManifestBlob(m.d, m.encoded)
		if err != nil {
			return nil, err
		}
		copyRecs = append(copyRecs, rs...)
	}
	err = st.Update(func(tx *bolt.Tx) error {
		if err := store.RecordBlobs(tx, copyRecs); err != nil {
			return err
		}
		for _, rec := range recs {
			old, ok, err := store.Blob(tx, rec.Digest)
			if err != nil && errs.ClassOf(err) != errs.IntegrityError {
				return err
			}
			if ok {
				err = store.ReplaceBlobRecords(tx, map[objects.Digest]store.BlobRecord{rec.Digest: old}, []store.BlobRecord{rec})
			} else {
				err = store.RecordBlobs(tx, []store.BlobRecord{rec})
			}
			if err != nil {
				return err
			}
			res.Blobs++
			res.Bytes += rec.Size
		}
		for _, m := range mans {
			if err := store.PutManifest(tx, m.d, m.encoded); err != nil {
				return err
			}
			res.Manifests++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

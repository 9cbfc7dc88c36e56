package main

import (
	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote/transfer"
	"github.com/mstore/mstore/internal/store"
)

// healFrom is `fsck --repair --from REMOTE`: what fsck found missing or
// corrupt is fetched again from the remote, then the store is checked
// again and that report is the one printed.
func healFrom(c *cli.Context, e *env, st *store.Store, r *store.FsckReport) (*store.FsckReport, error) {
	if !c.Bool("repair") {
		return nil, usageError("--from heals the store: give it with --repair")
	}
	if r.OK {
		return r, nil
	}
	blobs := map[objects.Digest]int64{}
	var manifests []objects.Digest
	for _, f := range append(append([]store.Finding{}, r.Missing...), r.Corrupt...) {
		d, err := objects.ParseDigest(f.ID)
		if err != nil {
			continue // not a blob or manifest (a ref record, the index): nothing to fetch
		}
		switch f.Kind {
		case "blob":
			blobs[d] = f.Size
		case "manifest":
			manifests = append(manifests, d)
		}
	}
	if len(blobs) == 0 && len(manifests) == 0 {
		return r, nil
	}
	rem, _, err := openRemote(c, st, c.String("from"), false)
	if err != nil {
		return nil, err
	}
	defer rem.Close()
	healed, err := transfer.Heal(c.Context, st, rem, blobs, manifests, c.Int("jobs"))
	if err != nil {
		return nil, err
	}
	e.note("fetched %d blobs (%s) and %d manifests again from %s\n", healed.Blobs, humanBytes(healed.Bytes), healed.Manifests, c.String("from"))
	return st.Fsck(c.Context, store.FsckOptions{Repair: true})
}

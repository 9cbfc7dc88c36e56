// Package gc frees what no named version needs, in two steps: NewPlan
// decides, Execute does. `mstore gc --dry-run` prints the plan and stops.
//
// Mark: every version named by a tag or by any entry of any ref's history
// is reachable; the blobs its manifest needs, and the manifest's own blob
// copy, are live. A named version whose manifest cannot be read (or that
// the store lacks) does not stop gc, but nobody can tell which blobs it
// needs: gc then keeps every recorded blob, does the rest (versions no name
// reaches, files the index does not record), and fails naming the version.
// A blob record that does not decode, refs that cannot be read, or a
// directory that cannot be listed stops gc before it changes anything: it
// never deletes what it could not judge.
//
// Sweep:
//   - manifests no name reaches, and the records of blobs none of the
//     reachable manifests needs, are removed from the index;
//   - a loose blob file whose record goes is deleted;
//   - a pack with no live blob is deleted; a pack with live blobs and unused
//     bytes (dead blobs, or copies two adds wrote at once) is repacked: its
//     live blobs are read back (each digest checked), written into new packs
//     made durable first, their records moved in the same index transaction,
//     and the old pack deleted after it;
//   - a file the index does not record (a temp file, a blob or pack written
//     by a command that crashed before its commit, or left by a gc that
//     crashed before its deletes) is deleted once it is older than the grace
//     period.
//
// Safety against concurrent commands: gc holds the store's lock exclusive
// for its whole run, and every add and checkout holds it shared for theirs,
// so gc never runs while an add has written blobs it has not recorded, or
// while a checkout reads. The lock is flock(2): a killed command's lock
// goes with its process. The grace period protects the files of a writer
// that does not take the lock. Commands that only touch names (tag, rm,
// trim) may run during gc: its index transaction checks again that no
// version it removes has been named meanwhile, and gives up (conflict)
// if one has.
//
// Order, so that a crash anywhere loses nothing: new packs are durable
// before any record points at them; the manifests, the repacked records
// and the first batch of dead records change in one transaction, the other
// dead records in batches after it, each keeping to a range of the key
// space (so that no transaction rewrites the whole index); files are
// deleted only after the last. A crash between two batches leaves blob
// records no version needs, which fsck calls unreferenced and the next gc
// removes; one between the commit and the deletes leaves unrecorded files,
// which fsck reports as leftovers and the next gc deletes. A failed delete
// is reported and makes gc fail; the file stays, as a leftover.
//
// Estimates: EstimateWithout and UsageOf say what a change to the names
// (rm, trim, every name of one version) would let gc free, by making the
// plan twice under the shared lock, once as the store is and once as if
// the names were gone (refs.Without), and comparing them. Such a plan is
// never executed (Execute refuses it), so `du REF`, `rm --dry-run` and
// `trim --dry-run` print the planner's own figures, not a guess.
//
// Failpoints (see store.Failpoint): FailAfterMark, FailAfterRepack,
// FailBetweenRemovals, FailAfterCommit, FailAfterDelete.
package gc

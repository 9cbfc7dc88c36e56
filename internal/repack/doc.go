// Package repack codes a store's blobs again, smaller, in two steps like
// gc: NewPlan decides, Execute does.
//
// Plan: every version's manifest says what its blobs are: tensor chunks
// (with their tensor's dtype, so the byte-plane count: BF16 2, F32 4, …),
// frames and the manifest copy (one plane). A tensor chunk gets a delta
// base when the tensor of the same name, dtype and byte length in the
// version `add --base REF` named, else in the ref's previous version (its
// history entry's Previous), else in the oldest version that has one,
// holds other bytes: the same-offset chunk of
// that tensor. Chains are depth 1: a blob that is, or will be, any delta's
// base is never made a delta; a base that is itself a delta (from an
// earlier run) is replaced by its own base. Blobs already coded are left as
// they are, so a second run does only what the first did not finish.
//
// Execute reads each raw blob (its digest checked), codes it (grouped, or
// the XOR delta against its base when that is smaller, or raw when neither
// pays) on every core, and writes the coded blobs into new packs in
// batches. Each batch is made durable, then its records are moved in one
// index transaction that first checks that every old record is as the plan
// saw it and that no delta's base is a delta (a concurrent add or repack
// shows up as a conflict; run repack again). The journal records each
// coded copy (where, coding, base), so `fsck --rebuild-index` decodes and
// checks them.
//
// Safety: repack holds the store's lock shared, as add does, so gc (which
// holds it exclusive) never runs meanwhile; checkouts may, since a record
// moves only to a durable copy of the same bytes. The raw files a batch
// supersedes are deleted at the end under the exclusive lock (no checkout
// is reading them then); when repack cannot take it, they stay as
// unrecorded files, which gc deletes. A crash or an interrupt loses at most
// the batch in flight (its packs are unrecorded files too); the next run
// resumes.
package repack

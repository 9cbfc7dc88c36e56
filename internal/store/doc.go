// Package store owns a store directory: the bbolt index, the blob files and
// the temp area beside them.
//
//	DIR/
//	  index.db         bbolt: format record, blob records, manifests (a stub
//	                   each: the bytes are the manifest's blob), refs, tags,
//	                   suspect blobs (what fsck found bad, until an add heals it)
//	  journal          append-only: ref moves, tags, trims, ref removals, which
//	                   blobs are manifests, where packed blobs lie (internal/journal)
//	  index.db.damaged-TIME  an index fsck --rebuild-index moved aside
//	  lock             flock(2): shared by add and checkout, exclusive for gc
//	  objects/ab/ab…   one file per blob, named by its full hex digest
//	  objects/packs/   pack files of small blobs (<id>.pack)
//	  tmp/             temp files; everything is written here first
//	  checkouts/       what each checkout wrote, so that --force replaces only that
//
// A blob file is written to tmp/, made durable, renamed under objects/, and
// the directory made durable; only then is it recorded in the index. Many
// blobs written by one command share two syncfs(2) calls (before and after
// the renames) instead of two fsyncs each. A file under its final name
// therefore always holds durable bytes.
//
// The index is opened for each transaction and closed after it, so that a
// long add or checkout never holds bbolt's file lock while it hashes or
// copies; a second process waits at most Options.LockTimeout for the lock.
// index.db itself is built under a temp name and linked into place, so it
// exists only once complete.
//
// index.db is never the only copy of what it records. Every manifest is
// a blob (the add writes it with the model's blobs; the index keeps a stub
// of its size and logical bytes, PutManifest), and every write
// transaction first appends what it changes that the blob files cannot tell
// to the journal, fsynced before the commit (Update). RebuildIndex rebuilds
// a lost or damaged index from the blob files, the pack files and the
// journal, re-hashing every blob; the old index is moved aside.
//
// A damaged index.db never crashes a command (guard.go): its meta and free
// list pages are checked before bbolt maps it (a truncated file would
// SIGBUS), every transaction runs with faults turned into panics and panics
// into an integrity_error that names `mstore fsck --rebuild-index`, and
// fsck reads every page in its own goroutine before bbolt's check (which
// runs in another, where a panic could not be recovered). An index.db that
// is gone while the journal is there is an integrity_error too, never a
// fresh empty store.
//
// Codings (encoding.go): a blob record says where the bytes lie (a loose
// file, a run of a pack) and how they are coded: raw, byte-grouped
// (internal/bytegroup) or an XOR delta against a base blob that is never
// itself a delta. Coded blobs live in packs, and the journal records each
// coded copy with its coding and base, so that the rebuild decodes and
// checks it. BlobReader.Read is the one read path: it decodes (with the
// base, for a delta) and checks the raw digest.
//
// Healing: fsck records the blobs it finds missing or corrupt (MarkSuspect);
// KnownBlobs leaves them out, so the next add of a model holding their bytes
// writes them again, and RecordBlobs points their record at the new copy
// (a loose file is replaced by rename; a packed blob gets a new copy and
// its old bytes become garbage for gc) and clears the mark.
//
// The lock file (Lock) keeps gc from deleting what an add has written and
// not yet recorded, or what a checkout reads. flock is released by the
// kernel when its process dies, however it dies, so a crashed command never
// leaves the store locked.
//
// Fsck re-hashes every blob and checks every manifest, ref and tag; what it
// finds missing or corrupt is an error, what crashed commands left behind
// (temp files, blob and pack files the index does not record) is not, and
// Repair removes it. The write path goes through an FS, so that tests can
// make any write, sync or rename fail; Failpoint lets tests stop a process
// at named instants of an add (MSTORE_FAILPOINT, in a -tags failpoints build).
package store

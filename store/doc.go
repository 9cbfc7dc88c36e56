// Package store owns a store directory: the bbolt index, the blob files and
// the temp area beside them.
//
//	DIR/
//	  index.db         bbolt: format record, blob records, manifests, refs, tags
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

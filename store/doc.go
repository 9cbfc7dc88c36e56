// Package store owns a store directory: the bbolt index, the blob files and
// the temp area beside them.
//
//	DIR/
//	  index.db         bbolt: format record, blob records, manifests, refs, tags
//	  objects/ab/ab…   one file per blob, named by its full hex digest
//	  tmp/             temp files; everything is written here first
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
package store

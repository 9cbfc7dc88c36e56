// Package restorer checks a model version out of a store into a directory:
// byte-identical as it was added, or re-laid-out by the target codec's
// planner (formats.Planner, found at internal/codecs). The restorer selects
// the tensors (through the source codec's formats.Expander, when it has
// one), asks the source what it carries (formats.Exporter), and writes and
// verifies what the planner returns; it holds no rule of any one format.
//
// Every blob is verified against its digest. A file written back in its
// manifest's own layout, or re-laid-out with no byte computed as it is
// written (copy.go), is copied by the kernel from the blob and pack files
// (copy_file_range; a reflink where the file system shares extents), a run
// of adjacent packed blobs in one call, and each blob is then hashed as it
// is in the output file, through a mapping: the bytes checked are the bytes
// written, and a stored file is not hashed again. Other files (casts,
// CRC-32 slots, encoded files) are written in order by one goroutine while
// workers fetch and verify the blobs ahead of it, and the file's BLAKE3 is
// computed on the way. Every goroutine of a checkout has ended when
// Checkout returns, error or not. Re-laid-out files are parsed again and
// their tensors re-hashed (each file opened once, small tensors read a
// block at a time) before the checkout reports success.
//
// The disk is asked to write each run as soon as it is written
// (writeback.go), so the sync before publishing waits for the last runs
// only.
//
// The destination appears whole or not at all: files are written into a
// temp directory beside it (workdir.go), synced, and renamed into place, or
// swapped with the directory there by renameat2(RENAME_EXCHANGE). A temp
// directory is owned by a lock file its checkout holds with flock(2); the
// next checkout into the same parent removes those whose owner has died.
//
// A checkout never deletes a file it did not write. What each checkout
// wrote is recorded in the store (dest.go: path, inode, size, mtime, ctime
// of every file), never in DEST, whose tree is exactly the model's.
// --force replaces only an empty DEST or an earlier checkout that its record
// says is unchanged; it then removes only the recorded files of the old
// tree. Anything else at DEST is a conflict that names what is in the way.
package restorer

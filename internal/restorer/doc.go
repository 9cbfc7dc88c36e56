// Package restorer checks a model version out of a store into a directory:
// byte-identical as it was added, or re-laid-out by the target codec's
// planner (formats.Planner, found at internal/codecs). The restorer selects
// the tensors (through the source codec's formats.Expander, when it has
// one), asks the source what it carries (formats.Exporter), and writes and
// verifies what the planner returns; it holds no rule of any one format.
//
// Every blob is hashed as it is read. Each file is written in order by one
// goroutine while workers fetch and verify the blobs ahead of it, so the
// file's BLAKE3 is computed on the way; every goroutine of a checkout has
// ended when Checkout returns, error or not. Re-laid-out files are parsed
// again and their tensors re-hashed before the checkout reports success.
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

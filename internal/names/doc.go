// Package names joins the store (blobs, manifests, the index) and the refs
// (names, histories, tags) for the commands: resolving NAME, NAME~N and
// NAME:TAG to a version of the store, listing and changing names, and the
// parts of fsck and of rebuilding the index that need both (checking that
// every name points at a manifest the store has, replaying the journal's
// ref records). It sits above store and refs, as gc does, so that neither
// of those imports the other, and the CLI runs no index transactions of
// its own.
package names

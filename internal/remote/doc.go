// Package remote defines what mstore needs from another store to push to
// and pull from it: one small interface, Remote, that every kind of remote
// implements (pathremote: another store directory; httpremote: a store
// served by `mstore serve`; s3remote: a bucket of an S3-compatible object
// store). remotetest holds the one conformance suite they all pass, and
// transfer moves versions between the local store and a Remote.
//
// A Remote is a dumb content store with two kinds of mutable name: blobs
// and manifests are immutable and named by their digest (written only if
// absent, verified by the receiver), refs move only by compare-and-swap,
// and tags are created once.
package remote

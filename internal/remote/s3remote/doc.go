// Package s3remote is a remote kept as objects in a bucket of any
// S3-compatible object store, with no server of mstore in between:
//
//	PREFIX/blobs/ab/HEX        a blob's raw bytes
//	PREFIX/packs/HEX.pack      small blobs of one push batch, end to end (packs.go)
//	PREFIX/packs/HEX.idx       where each of them is in HEX.pack
//	PREFIX/manifests/HEX       a manifest's canonical bytes
//	PREFIX/refs/NAME:ref       {"name","history":[{"digest","message","time"}…]}, newest first
//	PREFIX/tags/NAME:TAG       {"digest"}
//	PREFIX/locks/push-RANDOM   a push in progress; locks/gc: a gc (locks.go)
//
// (':' never appears in a name, so no key is a prefix "directory" of
// another on file-system backed servers.) Blobs, manifests and tags are
// written with If-None-Match: * and never rewritten; refs move with
// If-Match on the ETag read (compare-and-swap). A server that ignores
// these conditions is detected by a probe, once, and ref and tag writes
// are then refused rather than left to race.
package s3remote

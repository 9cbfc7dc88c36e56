// Package remotetest is the conformance suite every remote.Remote
// implementation passes (as go-git's storer tests are for its storers).
//
// The suite has a read side and a write side.
//
// The read side (readCases in read.go) runs for every remote. Its fixture
// (versions under a name: the ref, and tags) is put there by a Seeder:
// the remote's own writes (WriteFixture) unless Seeded gives another; an
// OCI registry cannot take mstore blobs, so ociremote's test pushes each
// version with ociremote.Push under its tag, the ref as the tag "latest".
// It checks: Ref and Tag resolve (not_found for unknown names, tags,
// manifests and blobs); GetManifest's bytes hash to the digest; HasBlobs of
// present and absent blobs in batches; GetBlob by offset and length, a
// range past the end refused as schema_error; GetBlobs of small blobs in
// any order, mixed across versions, an unknown one not_found; GetBlobs
// over MaxBatchBytes or MaxBatchBlobs, HasBlobs over MaxHasBlobs, refused
// as size_limit_exceeded. A
// remote answers for the versions its reader has resolved (ref or tag):
// a registry has no index of blobs by BLAKE3, only each artifact's map.
//
// With Tamper, the implementation's test damages a blob where the remote
// keeps it (path and HTTP: the loose file in the store, DamageLoose; S3:
// the object's file in versitygw's posix folder; OCI: a byte of the layer
// file in the registry's storage); reading it is then an integrity_error
// or bytes that do not hash to it (remote.Remote's reads are untrusted:
// the caller's check, transfer's, refuses them), and the blob beside it
// still reads right.
//
// The write side runs unless ReadOnly is given: PutBlobs, PutManifest,
// MoveRef's compare-and-swap, CreateTag's once-only tags, bounds, racing
// moves, two clients of one remote (TwoClients), coded blobs (when the
// remote is a remote.Coder). path, HTTP and S3 remotes run all of it. A
// ReadOnly remote (ociremote: a registry takes whole ModelPack artifacts
// and has no compare-and-swap) instead refuses each write with the class
// given, naming what to do (`mstore push oci://…`), and holds nothing of
// what it refused.
package remotetest

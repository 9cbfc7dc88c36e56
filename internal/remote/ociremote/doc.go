// Package ociremote is the oci://HOST[:PORT]/REPO[:TAG|@sha256:HEX] remote:
// an OCI registry (CNCF distribution, Harbor, GHCR, ECR, zot) holding each
// version as a CNCF ModelPack artifact (layouts/oci/modelpack), spoken to
// through oras-go (auth: the registry's Bearer token flow or basic
// credentials, from flags or a docker config.json).
//
// How mstore's names map onto a registry, which has tags (mutable) and
// manifest digests but no compare-and-swap:
//
//   - The repository is one mstore name, REPO (pull records it under
//     REPO, or --as).
//   - An mstore tag REPO:TAG is the registry tag TAG. Push creates it once:
//     a tag that names another version is a conflict, as tags never move.
//     The registry cannot make the check and the write one step, so two
//     pushes racing for one new tag can both write it (the last wins);
//     mstore detects nothing there.
//   - The ref REPO is read as the URL's reference (a tag, else "latest")
//     and never moved: a registry ignores If-Match on manifests, so a ref
//     move would not be a compare-and-swap. Push without a tag is refused.
//   - oci://HOST/REPO@sha256:HEX pins the OCI manifest digest: the pull
//     checks the manifest against it, and every blob through it.
//
// Push streams each file out of the store (every blob verified on the
// way), computes its sha256, asks the registry (HEAD) and uploads only the
// layers it lacks, trying a cross-repository mount first when --mount-from
// names where they may be. Pull reads the artifact's mstore map layer and
// fetches only the chunks the store lacks, by ranged reads of the file
// layers (modelpack.Source under transfer.Pull): each chunk verified by its
// BLAKE3, the map by its sha256 from the manifest, the manifest by its
// digest. Pull again moves nothing. An artifact another tool pushed (no map)
// is fetched whole into a temp layout and added from there.
//
// remotetest's conformance suite runs here (conformance_test.go) against
// a real registry: its read cases on versions pushed with Push, a layer
// damaged in the registry's storage, and every write through remote.Remote
// refused as unsupported_version, pointing to `mstore push oci://…:TAG`.
// Its write cases do not apply: a registry of whole-file layers without
// compare-and-swap cannot take PutBlobs, PutManifest or MoveRef.
package ociremote

// Package oci owns the OCI image layout of a ModelPack artifact (see
// modelpack for the artifact itself): `checkout --layout oci` writes one,
// `mstore add DIR` of one takes it in.
//
//	DIR/oci-layout            {"imageLayoutVersion":"1.0.0"}
//	DIR/index.json            one manifest descriptor (artifactType ModelPack)
//	DIR/blobs/sha256/<hex>    manifest, model config, one blob per file, mstore's map
//
// Checkout restores the version with the restorer (every blob verified)
// into a temp directory beside DIR, moves each file to its sha256 name,
// writes the documents, syncs, and renames the whole layout into place.
//
// Add reads index.json and the manifest (bounded), refuses a blob that is a
// link or not a regular file (path_traversal), checks every blob's size and
// sha256 (integrity_error) and every file path (path_traversal). A layout
// with mstore's map layer is taken in as a pull from a read-only remote
// over its files (modelpack.Source), so the version keeps its digest; one
// written by another tool is unpacked into a temp directory and added as
// any model directory.
package oci

// Package hfcache is the Hugging Face hub cache layout (`--layout
// hf-cache`), as huggingface_hub keeps it:
//
//	HUB/models--ORG--NAME/
//	    blobs/SHA256            an LFS file (weights), named by its SHA-256
//	    blobs/GITSHA1           another file, named by its git blob id:
//	                            sha1("blob " + size + "\x00" + content)
//	    snapshots/REV/PATH  ->  ../../blobs/…  (relative symlinks)
//	    refs/main               REV, no newline
//
// Add reads a snapshot (one version), a repo folder (each snapshot) or a
// whole HUB (each repo, each snapshot). A snapshot's links are followed by
// package modeldir, only into its own repo's blobs/ while that is a real
// folder on the repo's mount. Each snapshot becomes a version of the ref
// ORG/NAME tagged with its revision, and records in its manifest
// hf.repo, hf.revision and hf.refs (the refs/ files that named it). A
// repo's revisions are added oldest snapshot folder first and the one
// refs/main names last, so that the ref ends where the cache's main is.
//
// Checkout writes the snapshot back in that layout under a HUB folder,
// with the recorded revision and refs (a version added some other way gets
// the revision formed of its digest's first 40 hex digits, and refs/main).
package hfcache

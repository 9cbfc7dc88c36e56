// Package modelpack owns the CNCF ModelPack artifact as mstore writes and
// reads it (modelpack/model-spec v1): an OCI image manifest whose
// artifactType is application/vnd.cncf.model.manifest.v1+json, a model
// config (application/vnd.cncf.model.config.v1+json), and one layer per
// model file, named by its org.cncf.model.filepath annotation:
//
//	manifest ── config   {descriptor{name}, modelfs{layers, diffIds}, config{format}}
//	         ├─ layer    weight.v1.raw         model.safetensors   (the file's bytes)
//	         ├─ layer    weight.config.v1.raw  config.json
//	         ├─ …        doc / code raw layers, or tar layers of other tools
//	         └─ layer    application/vnd.mstore.map.v1+json (mstore's own, optional)
//
// The last layer is mstore's: the encoded mstore manifest and, per file,
// its sha256 and BLAKE3. With it a re-import is lossless (the same mstore
// digest), and every mstore blob can be located inside the file layers
// (Locate), so a registry pull fetches only the chunks a store lacks, by
// ranged reads. Artifacts of other tools (KitOps, modctl, ORAS) lack it and
// are taken in file by file.
//
// Everything read here comes from outside: documents are bounded, every
// digest must be a sha256, every file path must stay inside the model
// (path_traversal), and the map must agree with the layers (schema_error).
package modelpack

// Package objects owns mstore's domain words: the Digest that names bytes,
// how tensor data is cut into chunks, and the Manifest that describes one
// model version.
//
// A digest is BLAKE3-256. Tensor data (and frame data) is cut into chunks of
// at most ChunkSize bytes at offsets 0, ChunkSize, 2·ChunkSize, … from the
// start of the run, so that appending rows to a tensor re-uses every full chunk
// before the change. Each chunk is a blob.
//
// A manifest is encoded canonically (Manifest.Encode): the same model gives
// the same bytes on any machine, and the BLAKE3 of those bytes is the model
// version's id.
package objects

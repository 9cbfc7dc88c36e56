// Package gguf is the codec for GGUF files (ggml, llama.cpp), versions 2 and
// 3, single or split by gguf-split into NAME-0000K-of-0000N.gguf files.
//
// # File layout
//
// All numbers little-endian; a string is a u64 byte length then the bytes.
//
//	offset 0
//	┌──────────────────────────────────────────────────────────┐ ┐
//	│ "GGUF" │ version u32 │ n_tensors u64 │ n_kv u64           │ │
//	├──────────────────────────────────────────────────────────┤ │
//	│ n_kv × key/value: key string │ type u32 │ value           │ │ Frame
//	│   value: u8 i8 u16 i16 u32 i32 f32 bool(u8) u64 i64 f64,  │ │
//	│   string, or array: elem type u32 │ count u64 │ elements │ │
//	├──────────────────────────────────────────────────────────┤ │
//	│ n_tensors × tensor info: name string │ n_dims u32 │       │ │
//	│   ne[n_dims] u64 (fastest first) │ ggml type u32 │        │ │
//	│   offset u64 (into the data section)                      │ ┘
//	├──────────────────────────────────────────────────────────┤
//	│ zero padding to general.alignment (default 32)            │ Zeros
//	├──────────────────────────────────────────────────────────┤ ← data section
//	│ tensor 0 │ zeros to the alignment                          │ TensorData, Zeros
//	│ tensor 1 │ zeros to the alignment                          │ TensorData, Zeros
//	│ …                                                          │
//	└──────────────────────────────────────────────────────────┘
//
// Tensor i is at data offset Σ_{j<i} pad(size_j): offsets are the running
// padded sum, in tensor-info order (ggml/src/gguf.cpp refuses anything
// else). A tensor's size is ne[0]/block × bytes per block × ne[1] × ne[2] ×
// ne[3], with ne[0] a whole number of blocks; the block sizes of every ggml
// type are in types.go. A file without tensors may end right after its
// tensor infos (the vocabulary files of llama.cpp do); a file may end
// inside the padding after its last tensor.
//
// The header is cut into several Frame extents: each key/value of at least
// KVFrameMin bytes (a tokenizer's arrays, a long chat template) is a frame
// of its own, so versions that share a tokenizer share its blobs, and the
// manifest keeps those arrays by reference (see kvframes.go).
//
// Padding that is all zeros becomes a Zeros extent; padding with other
// bytes is kept in a Frame extent, so that every file comes back byte for
// byte. In the manifest a tensor's Shape is row-major (ne reversed, n_dims
// long) and its DType the upper-case ggml type name (F32, BF16, Q4_K,
// IQ2_XXS, TQ1_0, MXFP4, …). File.Meta keeps gguf.version, gguf.alignment
// and gguf.kv (the key/values as canonical JSON, see EncodeKVs), which is
// what a writer needs to lay the model out again or to convert it.
//
// # Split models
//
// gguf-split writes NAME-0000K-of-0000N.gguf (K from 1) with split.no (u16,
// K-1), split.count (u16, N) and split.tensors.count (i32, the tensors of all
// shards); the first shard has every other key/value, the others none.
// Parse takes such files as one model and refuses (schema_error) missing
// shards, disagreeing counts, a split.no that does not match the name (a
// duplicated shard), keys of the wrong type and tensor names repeated
// across files.
//
// # Errors
//
//   - invalid_archive: wrong magic, truncation anywhere in the header,
//     counts, strings and arrays longer than the bytes left, offsets that
//     are not the running padded sum (unaligned, out of order, gaps,
//     overlaps), tensors past the end of the file, bytes after the data;
//   - unsupported_version: version 0, 1 or above 3, byte-swapped
//     (big-endian) files, unknown or removed ggml types, unknown value
//     types, nested arrays;
//   - schema_error: empty, duplicate or non-UTF-8 keys; general.alignment
//     not a u32 power of two; bools other than 0 and 1; tensor names empty,
//     of 64 bytes or more, not UTF-8 or duplicated (also across files);
//     n_dims above 4; negative dims; element counts or sizes that
//     overflow; a row that is not whole blocks; inconsistent split shards;
//   - size_limit_exceeded: a header (key/values and tensor infos) over
//     MaxHeaderSize.
//
// # Planning
//
// Plan writes files as llama.cpp does (see Plan), optionally split as
// gguf-split does and with another alignment.
package gguf
